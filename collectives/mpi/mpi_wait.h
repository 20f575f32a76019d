// Waiting on MPI requests without eating a core.
//
// Open MPI makes progress on nonblocking operations (libnbc collectives especially) only while some thread
// is inside the library, so a waiter must keep calling MPI_Test. Backoff spaces those calls out: it spins
// for the first kSpin (short collectives finish there at full speed), then yields for a while, then sleeps
// with a doubling pause capped at kMaxSleep, so a rank waiting for a slow peer costs a few percent of a
// core instead of all of it. The numbers behind the constants are in collectives/mpi/README.md.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "base/deadline.h"

namespace braid::collectives::mpi {

class Backoff {
 public:
  static constexpr std::chrono::microseconds kSpin{20};
  static constexpr std::chrono::microseconds kYield{200};
  static constexpr std::chrono::microseconds kMaxSleep{50};

  Backoff() : start_(Clock::now()) {}
  // Waits a little, more the longer this Backoff has been waiting.
  void pause();
  // Starts over at spinning (after progress was observed).
  void reset();
  // How long the next pause() may sleep (zero while spinning or yielding).
  std::chrono::microseconds next_sleep() const;

 private:
  enum class Phase : uint8_t { Spin, Yield, Sleep };
  Clock::time_point start_;
  Phase phase_ = Phase::Spin;
  std::chrono::microseconds sleep_{1};
  unsigned calls_ = 0;
};

// Tests `request` until it completes (true; the request is then MPI_REQUEST_NULL) or `deadline` passes
// (false; the request is still active and the caller must keep its buffers alive). Throws CommError naming
// `what` when MPI reports an error.
bool test_until(MPI_Request& request, const Deadline& deadline, const std::string& what);

}  // namespace braid::collectives::mpi
