#include "runtime/run/signals.h"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <ctime>

#include "base/logging.h"

namespace braid::runtime {

namespace {

sigset_t job_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void block_job_signals() {
  const sigset_t set = job_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

std::string signal_name(int signo) {
  switch (signo) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGINT: return "SIGINT";
    default: return fmt::format("signal {}", signo);
  }
}

SignalWatcher::SignalWatcher(std::function<void(int)> on_signal) : on_signal_(std::move(on_signal)) {
  thread_ = std::thread([this] { run(); });
}

SignalWatcher::~SignalWatcher() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void SignalWatcher::run() {
  const sigset_t set = job_signals();
  // Short waits: the destructor's stop flag is seen within one of them.
  const timespec wait{0, 200'000'000};
  while (!stop_) {
    const int signo = sigtimedwait(&set, nullptr, &wait);
    if (signo < 0) continue;  // EAGAIN (the wait ended) or EINTR
    try {
      on_signal_(signo);
    } catch (const std::exception& e) {
      logging::get("braid.run")->error("handling {}: {}", signal_name(signo), e.what());
    }
  }
}

}  // namespace braid::runtime
