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
  const auto n = static_cast<size_t>(threads);
  workers_.reserve(n);
  sleepers_.reserve(n);
  threads_.reserve(n);
  for (size_t i = 0; i < n; ++i) workers_.push_back(std::make_unique<Worker>());
  for (size_t i = 0; i < n; ++i) threads_.emplace_back([this, w = workers_[i].get()] { run(*w); });
}

ThreadPool::~ThreadPool() { stop(); }

ThreadPool::Worker* ThreadPool::wake_one() {
  Worker* w = nullptr;
  if (!sleepers_.empty()) {
    w = sleepers_.back();
    sleepers_.pop_back();
  } else if (watcher_ != nullptr && !watcher_->woken) {
    w = watcher_;
  } else {
    return nullptr;
  }
  w->woken = true;
  ++waking_;
  return w;
}

void ThreadPool::submit(std::function<void()> task) {
  Worker* wake = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    queue_.push_back(Queued{std::move(task), Clock::now()});
    if (running_ + waking_ == 0) {
      wake = wake_one();  // nobody is awake to take it
    } else if (watcher_ == nullptr && waking_ == 0) {
      wake = wake_one();  // workers are running but nobody keeps time for them (once per busy spell)
    }
  }
  if (wake != nullptr) wake->cv.notify_one();
}

void ThreadPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    queue_.clear();
  }
  for (auto& w : workers_) w->cv.notify_all();
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

bool ThreadPool::should_take(Clock::time_point now) const {
  return !queue_.empty() && (running_ == 0 || now - queue_.front().since >= kHelpAfter);
}

void ThreadPool::run_task(std::unique_lock<std::mutex>& lock) {
  auto task = std::move(queue_.front().task);
  queue_.pop_front();
  ++running_;
  // Tasks left behind this one need a clock: wake a worker to keep it if nobody does.
  Worker* watcher = watcher_ == nullptr && waking_ == 0 && !queue_.empty() ? wake_one() : nullptr;
  lock.unlock();
  if (watcher != nullptr) watcher->cv.notify_one();
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

void ThreadPool::run(Worker& self) {
  t_current_pool = this;
  std::unique_lock<std::mutex> lock(mu_);
  const auto woken = [&] { return self.woken || stopping_; };
  for (;;) {
    if (stopping_) return;
    if (should_take(Clock::now())) {
      run_task(lock);
      // A worker that just finished is awake already: it takes whatever is queued, young or not.
      while (!stopping_ && !queue_.empty()) run_task(lock);
      continue;
    }
    if (running_ > 0 && watcher_ == nullptr) {
      // Keep time for the running workers: wake when the oldest queued task has waited kHelpAfter (or
      // after kHelpAfter, to look again, while the queue is empty).
      watcher_ = &self;
      const auto until = (queue_.empty() ? Clock::now() : queue_.front().since) + kHelpAfter;
      self.cv.wait_until(lock, until, woken);
      watcher_ = nullptr;
    } else {
      sleepers_.push_back(&self);
      self.cv.wait(lock, woken);
    }
    if (self.woken) {
      self.woken = false;
      --waking_;
    }
  }
}

}  // namespace braid::rpc
