#include "base/process_state.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace braid {

ProcessState process_state(int pid) {
  if (pid <= 0) return ProcessState::kUnknown;
  if (::kill(pid, 0) != 0) return errno == ESRCH ? ProcessState::kGone : ProcessState::kUnknown;
  char path[32];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  // Gone between the two looks; without /proc nothing more is known.
  if (fd < 0) return errno == ENOENT ? ProcessState::kGone : ProcessState::kUnknown;
  // "pid (comm) S ...": comm may hold spaces and parentheses, so the state follows the last ')'.
  char buf[512];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof(buf) - 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n == 0) return ProcessState::kGone;  // an empty stat: the process was reaped while it was read
  if (n < 0) return ProcessState::kUnknown;
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');
  if (close_paren == nullptr || close_paren[1] != ' ') return ProcessState::kUnknown;
  switch (close_paren[2]) {
    case 'Z':
    case 'X': return ProcessState::kExited;
    case 'T':
    case 't': return ProcessState::kStopped;
    default: return ProcessState::kRunning;
  }
}

}  // namespace braid
