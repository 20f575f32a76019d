#include "collectives/shm/peer_wait.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "base/timer_slack.h"

namespace braid::collectives::shm {
namespace {

using Clock = std::chrono::steady_clock;

// How often a long wait checks that the rank it waits for still runs (one kill(pid, 0)).
constexpr std::chrono::milliseconds kLivenessEvery{100};

// glibc reads /sys/devices/system/cpu/online on every sysconf(_SC_NPROCESSORS_ONLN): a few µs, once per
// wait, in ops that take a few µs. Read once.
long online_cpus() {
  static const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  return cpus;
}

class ArrivalWait {
 public:
  ArrivalWait(int local_ranks, int64_t bytes)
      : start_(Clock::now()),
        spin_(local_ranks <= online_cpus()),
        busy_(std::chrono::microseconds(1000 + bytes / 1000)) {}

  void pause(Clock::time_point now) {
    const auto waited = now - start_;
    if (spin_ && waited < std::chrono::microseconds(20)) return;
    if (waited < busy_) {
      ::sched_yield();
      return;
    }
    if (!slack_tightened_) {
      tighten_timer_slack();
      slack_tightened_ = true;
    }
    const timespec ts{0, static_cast<long>(sleep_.count() * 1000)};
    ::nanosleep(&ts, nullptr);
    sleep_ = std::min(sleep_ * 2, std::chrono::microseconds(50));
  }

 private:
  Clock::time_point start_;
  bool spin_;
  std::chrono::microseconds busy_;
  std::chrono::microseconds sleep_{1};
  bool slack_tightened_ = false;
};

}  // namespace

void wait_for_ranks(MemoryPool& pool, int lane, RankRange ranks, uint64_t target, int64_t bytes,
                    const OpContext& ctx, const char* op, const char* what) {
  ArrivalWait wait(pool.size(), bytes);
  const auto start = Clock::now();
  auto next_liveness_check = start + kLivenessEvery;
  for (int r = ranks.begin; r < ranks.end; ++r) {
    while (pool.slot(r, lane).arrived.load(std::memory_order_acquire) < target) {
      // One clock read per look: the liveness check, the deadline and the backoff share it.
      const auto now = Clock::now();
      if (now >= next_liveness_check) {
        next_liveness_check = now + kLivenessEvery;
        if (pool.exited(r)) {
          BRAID_THROW(CommError, "{}: rank {} (pid {}) exited while the shared-memory {} waited {:.0f} ms for it to {}",
                      ctx.what, r, pool.pid(r), op, std::chrono::duration<double, std::milli>(now - start).count(),
                      what);
        }
      }
      if (now >= ctx.deadline.at()) {
        std::vector<int> missing;
        for (int q = ranks.begin; q < ranks.end; ++q) {
          if (pool.slot(q, lane).arrived.load(std::memory_order_acquire) < target) missing.push_back(q);
        }
        BRAID_THROW(TimeoutError, "{}: the shared-memory {} waited {:.0f} ms for rank(s) {} to {}", ctx.what, op,
                    std::chrono::duration<double, std::milli>(now - start).count(), fmt::join(missing, ", "),
                    what);
      }
      wait.pause(now);
    }
  }
}

void check_staged_sizes(StagingArea& staging, int lane, int parity, uint64_t gen, int64_t bytes,
                        const OpContext& ctx, const char* verb) {
  MemoryPool& pool = staging.pool();
  for (int r = 0; r < pool.size(); ++r) {
    const int64_t theirs = *reinterpret_cast<const int64_t*>(staging.block(r, lane, parity));
    if (theirs != bytes) {
      pool.slot(pool.rank(), lane).arrived.store(staged_done(gen), std::memory_order_release);
      BRAID_THROW(CommError, "{}: invalid tensor size: rank {} {} {} bytes, rank {} {} {} bytes", ctx.what, r, verb,
                  theirs, pool.rank(), verb, bytes);
    }
  }
}

}  // namespace braid::collectives::shm
