// Polling with backoff, for the engine's waits on CUDA events and NCCL state. Small NCCL ops finish in
// microseconds, so the first polls only yield; after that the sleep doubles from 10 us up to 1 ms, which
// bounds both the CPU a long wait burns and how late a deadline is noticed.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace braid::collectives::nccl {

class Backoff {
 public:
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
    if (spins_ < kSpins) {
      ++spins_;
      return std::chrono::microseconds(0);
    }
    const auto d = sleep_;
    sleep_ = std::min(sleep_ * 2, kMaxSleep);
    return d;
  }
  void reset() {
    spins_ = 0;
    sleep_ = kMinSleep;
  }

 private:
  static constexpr int kSpins = 200;
  static constexpr std::chrono::microseconds kMinSleep{10};
  static constexpr std::chrono::microseconds kMaxSleep{1000};
  int spins_ = 0;
  std::chrono::microseconds sleep_ = kMinSleep;
};

}  // namespace braid::collectives::nccl
