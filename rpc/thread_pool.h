// A fixed pool of worker threads running queued tasks in FIFO order: where the RPC agent runs requests.
//
// submit() never blocks. The destructor (or stop()) lets the threads finish the task at hand, drops the
// rest of the queue and joins every thread. Tasks must not throw (an escaping exception is logged and
// dropped, so that one bad task cannot take a worker thread down).
//
// Waking a thread costs more than most RPC handlers (an empty call is a few microseconds; a futex wake and
// a context switch are as much again), so the pool does not wake a thread per task. A task submitted while
// no worker is running wakes one at once. A task submitted while workers are running waits for one of them
// to come free, unless it has waited kHelpAfter: then another worker takes it. One idle worker, the
// watcher, keeps time for that while any worker runs (a timed wait, not a spin). So a stream of short calls
// runs on one hot thread, and a task behind one that blocks (a handler waiting for another call, say)
// starts within 2 x kHelpAfter; a backlog of long tasks spreads over every thread, one more each
// kHelpAfter. Idle workers are woken last-in first-out, so the thread that ran last (warm caches) runs next
// and the watcher is left to its clock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace braid::rpc {

class ThreadPool {
 public:
  // How long a queued task waits for a running worker before an idle one takes it.
  static constexpr std::chrono::microseconds kHelpAfter{100};

  ThreadPool(int threads, std::string name);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void submit(std::function<void()> task);
  // Stops taking tasks, drops the queue and joins the threads. Idempotent. Not callable from a pool thread.
  void stop();
  // Tasks queued or running.
  size_t busy() const;
  // Whether the calling thread is one of this pool's.
  bool on_pool_thread() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Queued {
    std::function<void()> task;
    Clock::time_point since;
  };
  struct Worker {
    std::condition_variable cv;
    bool woken = false;  // GUARDED_BY(mu_): taken off sleepers_ (or the watch) by wake_one
  };

  void run(Worker& self);
  void run_task(std::unique_lock<std::mutex>& lock);
  // A worker coming out of a wait: whether it should take the head of the queue now.
  bool should_take(Clock::time_point now) const;
  // Marks the most recently idle worker (else the watcher) woken; returns it to be notified after the
  // lock is released, or nullptr when every worker is awake already.
  Worker* wake_one();

  mutable std::mutex mu_;
  std::deque<Queued> queue_;        // GUARDED_BY(mu_)
  size_t running_ = 0;              // GUARDED_BY(mu_): workers inside a task
  size_t waking_ = 0;               // GUARDED_BY(mu_): woken, not yet out of their wait
  std::vector<Worker*> sleepers_;   // GUARDED_BY(mu_): untimed waiters, the last to go idle at the back
  Worker* watcher_ = nullptr;       // GUARDED_BY(mu_): the idle worker keeping time for the running ones
  bool stopping_ = false;           // GUARDED_BY(mu_)
  std::string name_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;
};

}  // namespace braid::rpc
