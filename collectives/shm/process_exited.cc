#include "collectives/shm/process_exited.h"

#include "base/process_state.h"

namespace braid::collectives::shm {

bool process_exited(int pid) {
  const ProcessState s = process_state(pid);
  return s == ProcessState::kGone || s == ProcessState::kExited;
}

}  // namespace braid::collectives::shm
