// HealthMonitor: what a group knows of its own health and of its peers'.
//   * Sticky errors: the first failed op breaks the group; later calls throw CommError naming it.
//   * Missing ranks: while an op waits longer than a moment, a thread publishes its sequence number under
//     "braid/pg/<group>/progress/<rank>" in the group's store, so that a rank whose op times out can name
//     the ranks that never entered it (enrich_error).
//   * BRAID_DEBUG=DETAIL fingerprints: before each collective the ranks exchange a hash of (op, dtypes,
//     shapes, root, reduce op); a mismatch fails the op on every rank with an error naming the ranks that
//     differ.
//
// Thread-safety: every method may be called from any thread. Threads: the progress publisher, started
// when the group has a store and joined by stop() (docs/THREADING.md).
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "collectives/core/engine.h"
#include "collectives/queue/op_queue.h"
#include "store/store.h"

namespace braid::collectives {

class HealthMonitor {
 public:
  // `store` may be null: then nothing is published and reports say the missing ranks are unknown.
  // `queue` must outlive the monitor (or its stop()).
  HealthMonitor(GroupShape shape, std::string backend, std::shared_ptr<store::Store> store, const OpQueue& queue);
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

 private:
  void publish_loop();
  std::string missing_ranks_report(uint64_t seq);

  const GroupShape shape_;
  const std::string backend_;
  const std::shared_ptr<store::Store> store_;
  const OpQueue& queue_;
  const bool detail_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;        // GUARDED_BY(mu_)
  std::string broken_;           // GUARDED_BY(mu_)
  std::atomic<bool> is_broken_{false};  // set once broken_ is
  uint64_t published_seq_ = 0;   // GUARDED_BY(mu_)
  std::thread publisher_;
};

}  // namespace braid::collectives
