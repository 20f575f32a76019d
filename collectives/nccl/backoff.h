// Polling with backoff, for the engine's waits on CUDA events and NCCL state. Small NCCL ops finish in
// microseconds, so the first polls only yield; after that the sleep doubles from 10 us up to 1 ms, which
// bounds both the CPU a long wait burns and how late a deadline is noticed.
//
// A wait for an op of known size stays in the yielding phase for as long as the op may plausibly run
// (busy_window): sleeping through the end of a transfer adds the sleep to the op. Measured on an H200,
// one rank: a 256 MiB all-gather took 136 us through ncclAllGather + cudaStreamSynchronize and 171-178 us
// through braid while the wait went to sleep after 200 yields; the sleeps' 50 us default timer slack made
// the first 10 us sleep a 60 us one (the waiting thread now lowers its slack to 1 us).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <thread>

#include "base/timer_slack.h"

namespace braid::collectives::nccl {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;

  // 200 yields, then sleeps.
  Backoff() = default;
  // Yields (at least 200 times) until `busy` has passed, then sleeps.
  explicit Backoff(std::chrono::microseconds busy) : busy_until_(Clock::now() + busy), timed_(true) {}

  // 200 us plus the time `bytes` take at 10 GB/s: a pessimistic rate for a collective between GPUs (PCIe
  // or network; NVLink and a single GPU are faster), so that the wait yields through the transfer.
  static std::chrono::microseconds busy_window(size_t bytes) {
    return std::chrono::microseconds(200 + static_cast<int64_t>(bytes / 10'000));
  }

  void pause() {
    const auto d = step();
    if (d.count() == 0) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(d);
    }
  }
  // Advances the backoff and returns how long this pause should sleep (zero: just yield), for callers
  // that wait on a condition variable instead so that new work wakes them early.
  std::chrono::microseconds step() {
    if (spins_ < kSpins || (timed_ && Clock::now() < busy_until_)) {
      ++spins_;
      return std::chrono::microseconds(0);
    }
    tighten_timer_slack();
    const auto d = sleep_;
    sleep_ = std::min(sleep_ * 2, kMaxSleep);
    return d;
  }
  void reset() {
    spins_ = 0;
    sleep_ = kMinSleep;
    timed_ = false;
  }

 private:
  static constexpr int kSpins = 200;
  static constexpr std::chrono::microseconds kMinSleep{10};
  static constexpr std::chrono::microseconds kMaxSleep{1000};
  int spins_ = 0;
  std::chrono::microseconds sleep_ = kMinSleep;
  Clock::time_point busy_until_{};
  bool timed_ = false;
};

}  // namespace braid::collectives::nccl
