#include "rpc/thread_pool.h"

#include <exception>

#include "base/check.h"
#include "base/logging.h"

namespace braid::rpc {

namespace {
thread_local const ThreadPool* t_current_pool = nullptr;
}

ThreadPool::ThreadPool(int threads, std::string name) : name_(std::move(name)) {
  BRAID_CHECK_ARG(threads >= 1, "{}: needs at least one worker thread, got {}", name_, threads);
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

ThreadPool::~ThreadPool() { stop(); }

void ThreadPool::submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  BRAID_ASSERT(!on_pool_thread(), "{}: stop() called from one of its own threads", name_);
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  std::lock_guard<std::mutex> lock(mu_);
  threads_.clear();
}

size_t ThreadPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + running_;
}

bool ThreadPool::on_pool_thread() const { return t_current_pool == this; }

void ThreadPool::run() {
  t_current_pool = this;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    auto task = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    try {
      task();
    } catch (const std::exception& e) {
      logging::get("braid.rpc")->error("{}: a task threw: {}", name_, e.what());
    } catch (...) {
      logging::get("braid.rpc")->error("{}: a task threw a non-standard exception", name_);
    }
    task = nullptr;  // destroy captured state outside the lock, before counting the task done
    lock.lock();
    --running_;
  }
}

}  // namespace braid::rpc
