// Releasing a context on every worker that took part: the worker releases its own state, then tells the
// workers it exchanged messages with (except `from`, who told it), which do the same. A worker that no
// longer holds the context answers at once, so the cascade ends even though the workers know each other
// both ways.
//
// Leaving a context does not wait for that cascade (PyTorch's cleanup does not either: the round trip was
// 0.05-0.2 ms of every training step). The local state goes at once; PendingReleases keeps the rest until
// the workers confirm, logs a failure, and lets a caller that needs the job-wide release wait for it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "base/future.h"
#include "rpc/value.h"

namespace braid::dist_autograd {

// Completes when every worker reached from here has released `context_id` (or failed to answer: the
// error names it). `from` is the worker that asked (-1 for none).
Future<rpc::Value> release_everywhere(int64_t context_id, int from);

// The releases this process started (Context destructors) and the other workers have not confirmed yet.
// A failed release is logged here: nothing waits for it otherwise.
class PendingReleases {
 public:
  static PendingReleases& instance();

  // Tracks `released` until it completes. With kMaxPending releases unconfirmed already, waits (up to
  // `backpressure`) for one to finish first, so that a loop of contexts cannot outrun its releases without
  // bound.
  void track(int64_t context_id, Future<rpc::Value> released, std::chrono::milliseconds backpressure);
  // Waits until every release tracked so far is confirmed or failed; TimeoutError names those still out.
  void wait_all(std::chrono::milliseconds timeout);
  size_t size() const;

  static constexpr size_t kMaxPending = 1024;

 private:
  void finished(int64_t context_id, const Future<rpc::Value>& released);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<int64_t, std::chrono::steady_clock::time_point> pending_;  // GUARDED_BY(mu_): id -> start
};

}  // namespace braid::dist_autograd
