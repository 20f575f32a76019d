// EngineProcessGroup: a ProcessGroup composed of engines. It turns each call into a queued op and leaves the
// engines only their primitives on flat, contiguous, dense buffers (core/engine.h).
//
// What happens on a call, in the calling thread:
//   1. arguments are checked (core/checks.h): a bad call throws and communicates nothing;
//   2. the op takes the group's next sequence number and a deadline (per-call timeout or the group's);
//   3. a Work is returned at once and the op is posted on lane `seq % lanes` of the op queue (op_queue.h).
// On the lane's thread, or on the thread that waits for the op (op_queue.h), in issue order:
//   4. BRAID_DEBUG=DETAIL only: the ranks compare the op's fingerprint (health_monitor.h);
//   5. the op's body (op_bodies.h) packs the tensors into flat buffers and runs the primitive on the engine
//      the policy chooses (engine_policy.h, engine_router.h): the shared-memory engine or the network one;
//   6. results are copied back and the Work completes with torch's future value for the op.
// A failure or timeout completes the Work with an error that names the op, group, sequence number and
// elapsed time and, when the group has a store, the ranks that never entered the op. The error is sticky:
// the group is then broken and later calls throw CommError naming the first failure.
//
// Point-to-point ops are not queued: send/recv are posted at once on the network engine, so that a pending
// recv never blocks a later collective or send on the same group. barrier() first waits for every earlier
// op of every lane, so "barrier implies wait" holds.
//
// Ownership and shutdown: the group owns its engines, the queue and the health monitor. Its destructor
// drains the queue (every op still completes or times out) and joins every thread while the engines are
// still alive, then destroys the engines.
//
// Thread-safety: calls may come from any thread (see ProcessGroup for the ordering rule).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/core/engine.h"
#include "collectives/core/process_group.h"
#include "collectives/queue/engine_policy.h"
#include "collectives/queue/engine_router.h"
#include "collectives/queue/flight_recorder.h"
#include "collectives/queue/health_monitor.h"
#include "collectives/queue/op_queue.h"
#include "store/store.h"

namespace braid::collectives {

class EngineProcessGroup final : public ProcessGroup {
 public:
  struct Config {
    // Optional: the missing-ranks report, monitored_barrier and BRAID_DEBUG=DETAIL use it. Keys are
    // written under "braid/pg/<group name>/".
    std::shared_ptr<store::Store> store;
    Millis timeout = kDefaultCollectiveTimeout;
    EnginePolicy policy;
    // Waiter mode (op_queue.h); the lane count comes from the network engine.
    std::chrono::microseconds unclaimed_after{1000};
    std::chrono::microseconds look_gap_max{8000};
    // The stall watchdog warns about an op that runs longer than this (health_monitor.h); 0 turns it off.
    // Unset: BRAID_STALL_WARN_S, else kDefaultStallWarn.
    std::optional<Millis> stall_warn;
    // The flight recorder's ring (0: off). Unset: BRAID_TRACE_BUFFER_SIZE, else 2000.
    std::optional<size_t> trace_buffer_size;
    // The desync fingerprint check before each collective. Unset: BRAID_DEBUG=DETAIL.
    std::optional<bool> desync_check;
  };
  static constexpr Millis kDefaultStallWarn{60'000};

  // `network` runs every op the policy does not give `local` (which may be null); both must serve
  // `network->lanes()` lanes.
  EngineProcessGroup(GroupShape shape, std::unique_ptr<Engine> network, std::unique_ptr<Engine> local, Config config);
  // The same with a two-level engine (hier/; may be null), which the policy asks before the local one
  // (engine_policy.h); it too must serve `network->lanes()` lanes.
  EngineProcessGroup(GroupShape shape, std::unique_ptr<Engine> network, std::unique_ptr<Engine> local,
                     std::unique_ptr<Engine> hier, Config config);
  ~EngineProcessGroup() override;

  std::string backend_name() const override { return std::string(network_->name()); }
  std::shared_ptr<Work> issue(Call& call) override;
  // From the local engine's shared-memory pool when it has one (and room); ordinary memory otherwise.
  Tensor empty_shared(const Shape& shape, DType dtype, Device device = Device::cpu()) override;
  // A barrier that names who did not come (queue/monitored_barrier.h). Needs Config::store.
  void monitored_barrier(std::optional<Millis> timeout = std::nullopt, bool wait_all_ranks = false) override;

  int lanes() const { return queue_.lanes(); }
  // The group's last ops (flight_recorder.h).
  const FlightRecorder& recorder() const { return *recorder_; }
  const EnginePolicy& policy() const { return router_.policy(); }
  // The key under which rank r publishes the sequence number of the op it is waiting in.
  std::string progress_key(int rank) const { return health_.progress_key(rank); }
  // How many ops this rank ran on `engine` ("shm", ...) by `path` (that engine's counters(); 0 when the
  // group has no such engine or counter).
  uint64_t engine_count(std::string_view engine, std::string_view path) const;

 private:
  struct OpInfo {
    const char* op;
    std::optional<Millis> timeout;
    // BRAID_DEBUG=DETAIL only: a text that every rank must agree on.
    std::string signature;
    // About how many bytes the op moves; small ops are waited for by spinning briefly (see Work).
    int64_t bytes = 0;
    // For the flight recorder.
    TraceIo io;
  };
  using Body = std::function<TensorList(const OpContext&)>;

  // One per kind of call: checks, then enqueue().
  std::shared_ptr<Work> issue_one(BroadcastCall& c);
  std::shared_ptr<Work> issue_one(AllreduceCall& c);
  std::shared_ptr<Work> issue_one(AllreduceCoalescedCall& c);
  std::shared_ptr<Work> issue_one(ReduceCall& c);
  std::shared_ptr<Work> issue_one(AllgatherCall& c);
  std::shared_ptr<Work> issue_one(AllgatherIntoTensorCall& c);
  std::shared_ptr<Work> issue_one(AllgatherCoalescedCall& c);
  std::shared_ptr<Work> issue_one(AllgatherIntoTensorCoalescedCall& c);
  std::shared_ptr<Work> issue_one(GatherCall& c);
  std::shared_ptr<Work> issue_one(ScatterCall& c);
  std::shared_ptr<Work> issue_one(ReduceScatterCall& c);
  std::shared_ptr<Work> issue_one(ReduceScatterTensorCall& c);
  std::shared_ptr<Work> issue_one(ReduceScatterTensorCoalescedCall& c);
  std::shared_ptr<Work> issue_one(AlltoallCall& c);
  std::shared_ptr<Work> issue_one(AlltoallSingleCall& c);
  std::shared_ptr<Work> issue_one(SendCall& c);
  std::shared_ptr<Work> issue_one(RecvCall& c);
  std::shared_ptr<Work> issue_one(BarrierCall& c);

  // Assigns seq and deadline, creates the Work and posts `body` on its lane; the Work completes with body's
  // result (or its error, enriched).
  std::shared_ptr<Work> enqueue(OpInfo info, Body body);
  void run_op(const OpContext& ctx, const OpInfo& info, Body&& body, Work& work);
  // Posts a send or recv on the network engine, packing a non-contiguous tensor through a flat buffer.
  std::shared_ptr<Work> post_p2p(const char* op, TensorList& tensors, int peer, int tag, bool is_send);
  checks::Caller caller(std::string_view op) const;
  void throw_if_unusable(const char* op) const;
  std::vector<std::shared_ptr<Work>> incomplete_works();

  const GroupShape shape_;
  const Config config_;
  // Members go in reverse order: the engines, declared first, outlive the router, queue and monitor that use
  // them (the destructor also drains the queue and stops the monitor before any member goes).
  std::unique_ptr<Engine> network_;
  std::unique_ptr<Engine> local_;
  std::unique_ptr<Engine> hier_;
  EngineRouter router_;
  // Shared with the process-wide dump registry (flight_recorder.h) and the health monitor.
  std::shared_ptr<FlightRecorder> recorder_;
  OpQueue queue_;
  HealthMonitor health_;
  std::atomic<uint64_t> monitored_barriers_{0};
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  // Works that may not be complete yet, for barrier's "implies wait".
  std::vector<std::weak_ptr<Work>> in_flight_;  // GUARDED_BY(mu_)
};

}  // namespace braid::collectives
