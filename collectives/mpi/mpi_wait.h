// Waiting on MPI requests without eating a core.
//
// Open MPI makes progress on nonblocking operations (libnbc collectives, shared-memory fragments of large
// messages) only while some thread is inside the library, so a waiter must keep calling MPI_Test, and a
// waiter that sleeps slows the transfer itself: with 50 µs sleeps from the start, a 16 MiB allreduce took
// 9x as long as with MPI_Wait (README.md). Backoff therefore stays busy for as long as the operation
// could plausibly still be moving data — it spins for kSpin, then yields (other ranks of an oversubscribed
// job get the core) until its busy window ends — and only then sleeps, doubling the pause up to
// kMaxSleep (kMaxLongSleep after kLongWait), so a rank waiting for a peer that is late costs ~20% of a
// core for the first 100 ms and ~5% after that (measured, README.md).
// busy_window() sizes the window from the bytes in flight.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/deadline.h"

namespace braid::collectives::mpi {

class Backoff {
 public:
  static constexpr std::chrono::microseconds kSpin{20};
  static constexpr std::chrono::microseconds kMaxSleep{50};
  // A peer that is this late is really late (a straggler, a skipped op): sleep longer, at the cost of
  // noticing its arrival up to kMaxLongSleep later.
  static constexpr std::chrono::milliseconds kLongWait{100};
  static constexpr std::chrono::microseconds kMaxLongSleep{250};

  // Busy (spinning, then yielding) for `busy`, then sleeping. With `keep_core`, it spins instead of
  // yielding when this host has a core for every local rank; with fewer cores than local ranks it
  // yields from the start (see has_core_per_rank in the .cc). It never yields itself while Open MPI's
  // progress does (MpiRuntime::progress_yields_when_idle): the MPI_Test between pauses yields then.
  explicit Backoff(std::chrono::microseconds busy = busy_window(0), bool keep_core = false);
  // 1 ms plus the time `bytes` take at 0.5 GB/s, a pessimistic shared-memory rate on a loaded machine.
  static std::chrono::microseconds busy_window(size_t bytes) {
    return std::chrono::microseconds(1000 + static_cast<int64_t>(bytes / 500));
  }
  // Waits a little, more the longer this Backoff has been waiting.
  void pause();
  // The same, but sleeps through `sleep` (e.g. a condition-variable wait that a new request can end).
  void pause(const std::function<void(std::chrono::microseconds)>& sleep);
  // Starts over at spinning (after progress was observed), busy for `busy`.
  void reset(std::chrono::microseconds busy = busy_window(0));

 private:
  enum class Phase : uint8_t { Spin, Yield, Sleep };
  Clock::time_point start_;
  std::chrono::microseconds busy_;
  Phase phase_ = Phase::Spin;
  std::chrono::microseconds sleep_{1};
  unsigned calls_ = 0;
  bool spin_not_yield_ = false;
};

// Tests `request` (moving about `bytes` per rank) until it completes (true; the request is then
// MPI_REQUEST_NULL) or `deadline` passes (false; the request is still active and the caller must keep
// its buffers alive). Throws CommError naming `what` when MPI reports an error.
// `keep_core`: the caller has nothing else to run meanwhile (it is the thread waiting for the op), so the
// busy part of the wait may spin rather than yield (Backoff).
bool test_until(MPI_Request& request, size_t bytes, const Deadline& deadline, const std::string& what,
                bool keep_core = false);
// The same for several requests at once (MPI_Testall): true when every one completed (all are then
// MPI_REQUEST_NULL), false when `deadline` passed first (MPI_Testall then frees none of them, finished or
// not: the caller must keep every request and its buffers alive, e.g. through MpiP2p::adopt_abandoned).
// `statuses`, when given, has room for one status per request and receives them on completion.
bool test_all_until(std::vector<MPI_Request>& requests, size_t bytes, const Deadline& deadline,
                    const std::string& what, bool keep_core = false, MPI_Status* statuses = nullptr);

}  // namespace braid::collectives::mpi
