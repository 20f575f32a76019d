#include "runtime/run/signals.h"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <future>
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
// handler records it (an atomic store is async-signal-safe) and sends it on to the watcher's thread
// (tgkill, a plain system call), where it is blocked: its sigtimedwait() returns it at once. Waiting for
// the watcher's next 200 ms slice instead was too late under mpirun, which ends a rank within moments of
// its SIGTERM: the rank died before it named the failure behind the signal.
std::atomic<int> g_pending{0};
std::atomic<pid_t> g_watcher_tid{0};

pid_t this_thread_id() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

extern "C" void record_signal(int signo) {
  const int saved_errno = errno;
  g_pending.store(signo);
  // Never to the watcher itself (it blocks them, but a handler that ran there would resend forever).
  if (const pid_t tid = g_watcher_tid.load(); tid != 0 && tid != this_thread_id()) {
    ::syscall(SYS_tgkill, ::getpid(), tid, signo);
  }
  errno = saved_errno;
}

}  // namespace

void block_job_signals() {
  const sigset_t set = job_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  struct sigaction sa {};
  sa.sa_handler = record_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int signo : {SIGTERM, SIGUSR1, SIGINT}) sigaction(signo, &sa, nullptr);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, nullptr);
}

std::string signal_name(int signo) {
  switch (signo) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGINT: return "SIGINT";
    default: return fmt::format("signal {}", signo);
  }
}

SignalWatcher::SignalWatcher(std::function<void(int)> on_signal, std::chrono::milliseconds slice)
    : on_signal_(std::move(on_signal)), slice_(slice) {
  // Returns once the thread takes signals: one sent right after is forwarded to it.
  std::promise<void> started;
  thread_ = std::thread([this, &started] { run(started); });
  started.get_future().wait();
}

SignalWatcher::~SignalWatcher() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void SignalWatcher::run(std::promise<void>& started) {
  const sigset_t set = job_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // sigtimedwait takes only blocked signals
  const pid_t self = this_thread_id();
  g_watcher_tid.store(self);
  started.set_value();
  // Short waits: the destructor's stop flag is seen within one of them.
  const timespec wait{static_cast<time_t>(slice_.count() / 1000), static_cast<long>(slice_.count() % 1000) * 1'000'000};
  while (!stop_) {
    int signo = sigtimedwait(&set, nullptr, &wait);
    if (signo < 0) {
      signo = g_pending.exchange(0);  // the wait ended (EAGAIN, EINTR): one a handler caught?
    } else {
      int forwarded = signo;  // a handler's, sent on here: it is handled now, not again after the next wait
      g_pending.compare_exchange_strong(forwarded, 0);
    }
    if (signo == 0) continue;
    try {
      on_signal_(signo);
    } catch (const std::exception& e) {
      logging::get("braid.run")->error("handling {}: {}", signal_name(signo), e.what());
    }
  }
  pid_t mine = self;
  g_watcher_tid.compare_exchange_strong(mine, 0);
}

}  // namespace braid::runtime
