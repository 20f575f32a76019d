#include "collectives/core/work.h"

#include <sched.h>

#include <algorithm>

namespace braid::collectives {

Work::Work(std::string what, std::chrono::milliseconds default_timeout)
    : future_(std::move(what)), default_timeout_(default_timeout) {}

namespace {
// wait() without a limit waits this much past the op's own timeout: the op fails at its deadline with an
// error naming the op and the ranks that never joined, and that error (not a bare "timed out waiting")
// is what the caller should see.
constexpr std::chrono::milliseconds kOwnErrorGrace{5000};
}  // namespace

void Work::wait(std::optional<std::chrono::milliseconds> timeout) {
  // Clamped first so that a "forever" timeout cannot overflow when the grace is added.
  const auto own = std::min(default_timeout_, std::chrono::milliseconds(std::chrono::hours(24 * 365)));
  const auto limit = std::min(timeout.value_or(own + kOwnErrorGrace),
                              std::chrono::milliseconds(std::chrono::hours(24 * 365)));
  const auto until = std::chrono::steady_clock::now() + limit;
  // The op (and what precedes it on its lane) may still be queued with nobody running it: run it here
  // rather than hand it to the lane's thread and sleep until that thread wakes us. Only ops that end (or
  // time out) within this wait's limit are run, so wait(timeout) still returns on time.
  if (helper_ && !future_.completed()) helper_->help(*this, until);
  // Small collectives finish within microseconds of being waited for: looking briefly before blocking
  // saves the wake-up of a sleeping thread (several microseconds, a large share of a 4 KiB allreduce).
  // The group sets the spin from the op's size (set_wait_spin); none by default.
  if (!future_.completed() && wait_spin_.count() > 0) {
    const auto spin_until = std::chrono::steady_clock::now() + wait_spin_;
    while (!future_.completed() && std::chrono::steady_clock::now() < spin_until) ::sched_yield();
  }
  // An op that completed (usually: the waiter ran it) needs no more clock reads; at ~30 ns each on a VM
  // they were a quarter of braid's own cost per small op.
  if (future_.completed()) {
    future_.value(std::chrono::milliseconds(0));
    return;
  }
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
  future_.value(std::max(left, std::chrono::milliseconds(0)));
}

}  // namespace braid::collectives
