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

// Threads that libraries started before block_job_signals() (OpenBLAS makes its pool when it is loaded)
// do not block the signals, and the kernel may hand a process-directed signal to one of them. The
// handler only records it (an atomic store is async-signal-safe); the watcher's thread picks it up.
std::atomic<int> g_pending{0};

extern "C" void record_signal(int signo) { g_pending.store(signo); }

}  // namespace

void block_job_signals() {
  const sigset_t set = job_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  struct sigaction sa {};
  sa.sa_handler = record_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int signo : {SIGTERM, SIGUSR1, SIGINT}) sigaction(signo, &sa, nullptr);
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
    int signo = sigtimedwait(&set, nullptr, &wait);
    if (signo < 0) signo = g_pending.exchange(0);  // the wait ended (EAGAIN, EINTR): one a handler caught?
    if (signo == 0) continue;
    try {
      on_signal_(signo);
    } catch (const std::exception& e) {
      logging::get("braid.run")->error("handling {}: {}", signal_name(signo), e.what());
    }
  }
}

}  // namespace braid::runtime
