// HealthMonitor: what a group knows of its own health and of its peers'.
//   * Sticky errors: the first failed op breaks the group; later calls throw CommError naming it.
//   * Missing ranks: while an op waits longer than a moment, a thread publishes its sequence number under
//     "braid/pg/<group>/progress/<rank>" in the group's store, so that a rank whose op times out can name
//     the ranks that never entered it (enrich_error).
//   * Stall watchdog: an op that has run longer than `stall_warn` (failure.stall_warn_s, BRAID_STALL_WARN_S,
//     default 60 s), long before its timeout, is logged once as a warning naming the op and the ranks
//     that never joined it, noted in the flight recorder, and every recorder of the process is dumped.
//   * Flight recorder dumps on SIGUSR2: the monitor thread polls the signal's flag (flight_recorder.h).
//   * BRAID_DEBUG=DETAIL fingerprints: before each collective the ranks exchange a hash of (op, dtypes,
//     shapes, root, reduce op); a mismatch fails the op on every rank with an error naming the ranks that
//     differ.
//
// Thread-safety: every method may be called from any thread. Threads: the monitor (progress publisher,
// stall watchdog, SIGUSR2 dumps), started when the group has a store or a stall_warn, joined by stop()
// (docs/THREADING.md).
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/core/engine.h"
#include "collectives/queue/flight_recorder.h"
#include "collectives/queue/op_queue.h"
#include "store/store.h"

namespace braid::collectives {

class HealthMonitor {
 public:
  struct Config {
    // 0 turns the stall watchdog off.
    Millis stall_warn{60'000};
    // Where stalls are noted (may be null).
    std::shared_ptr<FlightRecorder> recorder;
    // Fingerprints before each collective; unset: BRAID_DEBUG=DETAIL.
    std::optional<bool> detail;
  };
  // `store` may be null: then nothing is published and reports say the missing ranks are unknown.
  // `queue` must outlive the monitor (or its stop()).
  HealthMonitor(GroupShape shape, std::string backend, std::shared_ptr<store::Store> store, const OpQueue& queue,
                Config config);
  ~HealthMonitor();  // calls stop()
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  // Joins the progress publisher. Idempotent.
  void stop();

  // BRAID_DEBUG=DETAIL: whether ops exchange fingerprints.
  bool detail() const { return detail_; }
  // Whether an op failed (one atomic load: every op asks before it runs).
  bool is_broken() const { return is_broken_.load(std::memory_order_acquire); }
  // The group's failure, once it is broken ("" while it is healthy).
  std::string broken() const;
  // Throws CommError "<op> on group ...: the group is broken since an earlier op failed" once broken.
  void throw_if_broken(const char* op) const;
  // Records the first failure; later ones are ignored.
  void record_failure(const std::string& what);
  // The error an op's failure surfaces as: a TimeoutError with the missing-ranks report, or a CommError
  // naming the op and its elapsed time (an error that already names the op is passed on as it is).
  std::exception_ptr enrich_error(const OpContext& ctx, std::exception_ptr error, double elapsed_ms);
  // The key under which rank r publishes the sequence number of the op it is waiting in.
  std::string progress_key(int rank) const;
  // Exchanges `signature`'s hash through `engine` (an allgather on its device) and throws CommError naming
  // the ranks whose signature differs.
  void check_fingerprint(const OpContext& ctx, const std::string& signature, Engine& engine);

  // BRAID_STALL_WARN_S in seconds (a number; 0 turns the watchdog off), else `fallback`.
  static Millis stall_warn_from_env(Millis fallback);

 private:
  // Who has not joined op `seq`, read from the other ranks' published progress.
  struct Missing {
    std::vector<int> never;                        // no progress published at all
    std::vector<std::pair<int, uint64_t>> behind;  // last seen waiting in an earlier op
    std::string unknown;                           // why it cannot be told ("" when it can)
  };
  void monitor_loop();
  void publish(Clock::time_point now);
  void check_stalls(Clock::time_point now);
  Missing find_missing(uint64_t seq);
  static std::string describe(const Missing& m);
  std::string missing_ranks_report(uint64_t seq);

  const GroupShape shape_;
  const std::string backend_;
  const std::shared_ptr<store::Store> store_;
  const OpQueue& queue_;
  const bool detail_;
  const Config config_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;        // GUARDED_BY(mu_)
  std::string broken_;           // GUARDED_BY(mu_)
  std::atomic<bool> is_broken_{false};  // set once broken_ is
  uint64_t published_seq_ = 0;   // the monitor thread's own
  uint64_t warned_seq_ = 0;      // the monitor thread's own: the newest op the watchdog warned about
  std::thread monitor_;
};

}  // namespace braid::collectives
