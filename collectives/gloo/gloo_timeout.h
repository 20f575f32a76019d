// The timeout a gloo call gets for the time left before a braid Deadline.
#pragma once

#include <algorithm>
#include <chrono>

#include "base/deadline.h"

namespace braid::collectives::gloo {

// gloo waits with condition_variable::wait_for(timeout): Millis::max() would overflow the clock, and
// zero means "time out at once" (or "no timeout" for some calls), so a deadline that never expires
// becomes a year and an expired one a millisecond (the wait then fails as a timeout).
inline std::chrono::milliseconds gloo_timeout(const Deadline& deadline) {
  constexpr std::chrono::milliseconds kForever = std::chrono::hours(24 * 365);
  if (deadline.is_never()) return kForever;
  return std::clamp(deadline.remaining(), std::chrono::milliseconds(1), kForever);
}

}  // namespace braid::collectives::gloo
