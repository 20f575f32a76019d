// A fixed pool of worker threads running queued tasks in FIFO order: where the RPC agent runs requests.
//
// submit() never blocks. The destructor (or stop()) lets the threads finish the task at hand, drops the
// rest of the queue and joins every thread. Tasks must not throw (an escaping exception is logged and
// dropped, so that one bad task cannot take a worker thread down).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace braid::rpc {

class ThreadPool {
 public:
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
  void run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // GUARDED_BY(mu_)
  size_t running_ = 0;                       // GUARDED_BY(mu_)
  bool stopping_ = false;                    // GUARDED_BY(mu_)
  std::string name_;
  std::vector<std::thread> threads_;
};

}  // namespace braid::rpc
