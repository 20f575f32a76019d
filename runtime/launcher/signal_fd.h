// Signals as events on a file descriptor, so that the launcher's poll() loop sees a SIGTERM, a SIGCHLD
// and a child's output in one place, with no signal handler and no flag to race on.
//
// The constructor blocks the signals in the calling thread and opens a signalfd for them; the destructor
// reads away what is still pending (a late SIGTERM must not kill the launcher after it has decided its
// exit code) and restores the previous mask. A process-directed signal goes to any thread that does not
// block it, so the owner must be the process's only thread, as the `braid` executable is when it launches.
#pragma once

#include <signal.h>

#include <initializer_list>
#include <optional>

#include "runtime/launcher/unique_fd.h"

namespace braid::runtime::launcher {

class SignalFd {
 public:
  explicit SignalFd(std::initializer_list<int> signals);
  ~SignalFd();
  SignalFd(const SignalFd&) = delete;
  SignalFd& operator=(const SignalFd&) = delete;

  int fd() const { return fd_.get(); }
  // The next pending signal, or nullopt when none is pending (never blocks).
  std::optional<int> next();

 private:
  sigset_t previous_mask_;
  UniqueFd fd_;
};

}  // namespace braid::runtime::launcher
