#include "runtime/launcher/signal_fd.h"

#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/check.h"

namespace braid::runtime::launcher {

SignalFd::SignalFd(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : signals) sigaddset(&set, s);
  const int rc = ::pthread_sigmask(SIG_BLOCK, &set, &previous_mask_);
  if (rc != 0) BRAID_THROW(Error, "braid launch: cannot block signals: {}", std::strerror(rc));
  fd_.reset(::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd_.valid()) {
    const int err = errno;
    ::pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
    BRAID_THROW(Error, "braid launch: signalfd failed: {}", std::strerror(err));
  }
}

SignalFd::~SignalFd() {
  while (next()) {
  }
  fd_.reset();
  ::pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
}

std::optional<int> SignalFd::next() {
  signalfd_siginfo info;
  for (;;) {
    const ssize_t n = ::read(fd_.get(), &info, sizeof(info));
    if (n == static_cast<ssize_t>(sizeof(info))) return static_cast<int>(info.ssi_signo);
    if (n < 0 && errno == EINTR) continue;
    return std::nullopt;  // EAGAIN: nothing pending
  }
}

}  // namespace braid::runtime::launcher
