// Deadlines for every wait in braid. A Deadline is a point on the steady clock; waits take one so that a
// chain of waits shares one budget instead of each starting its own timeout.
#pragma once

#include <chrono>
#include <cstdint>

namespace braid {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

class Deadline {
 public:
  // A deadline `timeout` from now. A timeout of zero or less is already expired.
  static Deadline after(Millis timeout) { return Deadline(Clock::now() + timeout); }
  // A deadline that never expires, for callers that explicitly opt out of a timeout.
  static Deadline never() { return Deadline(Clock::time_point::max()); }

  explicit Deadline(Clock::time_point at) : at_(at) {}

  Clock::time_point at() const { return at_; }
  bool expired() const { return Clock::now() >= at_; }
  bool is_never() const { return at_ == Clock::time_point::max(); }
  // Time left, never negative.
  Millis remaining() const { return remaining(Clock::now()); }
  // Time left at `now`, for a caller that has just read the clock (hot paths read it once).
  Millis remaining(Clock::time_point now) const {
    if (is_never()) return Millis::max();
    const auto left = std::chrono::duration_cast<Millis>(at_ - now);
    return left.count() > 0 ? left : Millis(0);
  }

 private:
  Clock::time_point at_;
};

// Milliseconds since `start`, as a double, for logs and error messages.
inline double elapsed_ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace braid
