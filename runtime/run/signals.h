// The job's signals: SIGTERM (a scheduler ending the job), SIGUSR1 (Slurm's --signal before the time
// limit) and SIGINT (Ctrl-C) ask for a checkpoint and a clean stop of every rank.
//
// block_job_signals() blocks them in the calling thread before any other thread exists, so that every
// thread inherits the mask and none is interrupted at a random point; a SignalWatcher's thread then takes
// them with sigtimedwait() (polling a stop flag, so that it can be joined) and calls the handler in that
// thread.
//
// It also ignores SIGPIPE: a write to a peer's socket that broke (Gloo's TCP pairs write without
// MSG_NOSIGNAL) or to a launcher's output pipe that it closed while ending the job must fail as an
// error, not end the rank in silence before it names the failure (as Python does for PyTorch).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>

namespace braid::runtime {

void block_job_signals();
// "SIGTERM", "SIGUSR1", "SIGINT", else "signal N".
std::string signal_name(int signo);

class SignalWatcher {
 public:
  // `slice`: how long one wait lasts, so how soon the destructor's stop is seen (tests lengthen it).
  explicit SignalWatcher(std::function<void(int signo)> on_signal,
                         std::chrono::milliseconds slice = std::chrono::milliseconds(200));
  ~SignalWatcher();  // stops and joins the thread
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  void run(std::promise<void>& started);
  std::function<void(int)> on_signal_;
  const std::chrono::milliseconds slice_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace braid::runtime
