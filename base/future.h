// Future<T>: a value (or an error) that arrives later, shared by the collectives' Work and the RPC layer.
//
// A Future is a handle to shared state: copies observe the same completion. It completes exactly once,
// with set_value() or set_error(); completing twice throws InternalError. Callbacks registered with
// add_callback() run exactly once: immediately on the registering thread if the future is already complete,
// otherwise on the thread that completes it, in registration order, after waiters have been released.
// then() chains: the returned future completes with the callback's result, or with the callback's
// exception, or with this future's error (the callback is then not called).
//
// Every wait is bounded: wait(timeout) throws TimeoutError naming `what` (set by the producer, e.g.
// "allreduce #42 on group world") when it runs out (30 minutes when no timeout is given); value()
// rethrows the stored error.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/error.h"

namespace braid {

// The wait bound when a caller gives none: as long as the collectives' default timeout.
inline constexpr std::chrono::milliseconds kDefaultFutureTimeout{30 * 60 * 1000};

template <class T>
class Future {
 public:
  using Callback = std::function<void(const Future<T>&)>;

  explicit Future(std::string what = "future") : state_(std::make_shared<State>()) { state_->what = std::move(what); }

  // Producer side.
  void set_value(T value) const {
    complete([&](State& s) { s.value.emplace(std::move(value)); });
  }
  void set_error(std::exception_ptr error) const {
    complete([&](State& s) { s.error = std::move(error); });
  }

  // Consumer side. The value and the error never change once `done` is set (release, after both), so a
  // reader that sees it set (acquire) reads them without the lock: a collective's waiter otherwise took
  // the mutex three or four times per op.
  bool completed() const { return state_->done.load(std::memory_order_acquire); }
  bool has_error() const { return completed() && state_->error != nullptr; }
  std::exception_ptr error() const { return completed() ? state_->error : nullptr; }
  // Blocks until complete or `timeout` passes (TimeoutError). Does not rethrow the future's error.
  void wait(std::chrono::milliseconds timeout = kDefaultFutureTimeout) const {
    // Clamp so that "very long" timeouts cannot overflow the clock arithmetic.
    timeout = std::min(timeout, std::chrono::milliseconds(std::chrono::hours(24 * 365)));
    if (completed()) return;  // without the lock, nor reading the clock (wait_for does, even when it need not wait)
    std::unique_lock<std::mutex> lock(state_->mu);
    if (!state_->cv.wait_for(lock, timeout, [&] { return state_->done.load(std::memory_order_relaxed); })) {
      BRAID_THROW(TimeoutError, "{}: timed out after {} ms waiting for completion", state_->what, timeout.count());
    }
  }
  // Waits (up to `timeout`) and returns the value, rethrowing the error if it failed.
  const T& value(std::chrono::milliseconds timeout = kDefaultFutureTimeout) const {
    wait(timeout);
    if (state_->error) std::rethrow_exception(state_->error);
    return *state_->value;
  }

  void add_callback(Callback cb) const {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (!state_->done.load(std::memory_order_relaxed)) {
        state_->callbacks.push_back(std::move(cb));
        return;
      }
    }
    cb(*this);
  }

  // A future of fn(value); errors skip fn and propagate.
  template <class F>
  auto then(F fn, std::string what = "then") const -> Future<std::invoke_result_t<F, const T&>> {
    using U = std::invoke_result_t<F, const T&>;
    Future<U> next(std::move(what));
    add_callback([next, fn = std::move(fn)](const Future<T>& self) mutable {
      if (auto err = self.error()) {
        next.set_error(err);
        return;
      }
      try {
        next.set_value(fn(self.value()));
      } catch (...) {
        next.set_error(std::current_exception());
      }
    });
    return next;
  }

  const std::string& what() const { return state_->what; }
  bool same_as(const Future& other) const { return state_ == other.state_; }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::atomic<bool> done{false};
    std::optional<T> value;
    std::exception_ptr error;
    std::vector<Callback> callbacks;
    std::string what;
  };

  // Stores the value or the error (`fill`), then marks the future done and runs the callbacks.
  template <class Fill>
  void complete(Fill&& fill) const {
    std::vector<Callback> callbacks;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      BRAID_ASSERT(!state_->done.load(std::memory_order_relaxed), "{} completed twice", state_->what);
      fill(*state_);
      state_->done.store(true, std::memory_order_release);
      callbacks.swap(state_->callbacks);
    }
    state_->cv.notify_all();
    for (auto& cb : callbacks) cb(*this);
  }

  std::shared_ptr<State> state_;
};

// Waits for every future (each within the remaining part of `timeout`); rethrows the first error.
template <class T>
std::vector<T> wait_all(const std::vector<Future<T>>& futures, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<T> out;
  out.reserve(futures.size());
  for (const auto& f : futures) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    out.push_back(f.value(std::max(left, std::chrono::milliseconds(0))));
  }
  return out;
}

}  // namespace braid
