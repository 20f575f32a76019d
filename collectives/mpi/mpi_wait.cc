#include "collectives/mpi/mpi_wait.h"

#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>

#include "collectives/mpi/mpi_runtime.h"

namespace braid::collectives::mpi {

namespace {

// Linux rounds a thread's sleeps up by its timer slack (50 µs by default), which would make the first,
// short sleeps as long as the cap. A 1 µs slack lets the backoff start small; it only affects the
// waiting thread.
void tighten_timer_slack() {
  thread_local bool done = false;
  if (done) return;
  done = true;
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
}

}  // namespace

void Backoff::pause() {
  pause([](std::chrono::microseconds d) {
    const timespec ts{0, static_cast<long>(std::chrono::nanoseconds(d).count())};
    ::nanosleep(&ts, nullptr);
  });
}

void Backoff::pause(const std::function<void(std::chrono::microseconds)>& sleep) {
  if (phase_ == Phase::Spin) {
    // Reading the clock costs ~20 ns; looking every 16 calls keeps the spin tight.
    if ((++calls_ & 15U) != 0 || Clock::now() - start_ < kSpin) return;
    phase_ = Phase::Yield;
  }
  if (phase_ == Phase::Yield) {
    if (Clock::now() - start_ < busy_) {
      ::sched_yield();
      return;
    }
    phase_ = Phase::Sleep;
    tighten_timer_slack();
  }
  sleep(sleep_);
  const auto cap = Clock::now() - start_ < busy_ + kLongWait ? kMaxSleep : kMaxLongSleep;
  sleep_ = std::min(sleep_ * 2, cap);
}

void Backoff::reset(std::chrono::microseconds busy) {
  start_ = Clock::now();
  busy_ = busy;
  phase_ = Phase::Spin;
  sleep_ = std::chrono::microseconds(1);
  calls_ = 0;
}

bool test_until(MPI_Request& request, size_t bytes, const Deadline& deadline, const std::string& what) {
  Backoff backoff(Backoff::busy_window(bytes));
  unsigned polls = 0;
  while (true) {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test", what);
    if (done) return true;
    // A never-expiring deadline needs no clock reads; otherwise look every 64 polls (a few µs).
    if (!deadline.is_never() && (++polls & 63U) == 0 && deadline.expired()) return false;
    backoff.pause();
  }
}

}  // namespace braid::collectives::mpi
