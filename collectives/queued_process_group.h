// QueuedProcessGroup: the part of a ProcessGroup that every engine shares. It turns each public call
// into a queued op and leaves the engine (Open MPI, Gloo, NCCL) only a small set of primitives on flat,
// contiguous, dense buffers.
//
// What happens on a call, in the calling thread:
//   1. arguments are checked (collectives/checks.h): a bad call throws and communicates nothing;
//   2. the op takes the group's next sequence number and a deadline (per-call timeout or the group's);
//   3. a Work is returned at once and the op is queued on lane `seq % lanes()`.
// On the lane's worker thread, or on the thread that waits for the op when the lane is idle (Work::wait
// runs it itself, see Lane in the .cc: no thread hand-off for a caller that posts and waits), in issue order:
//   4. inputs are staged into one flat buffer when needed: non-contiguous tensors and lists are packed,
//      bool becomes uint8 with logical ops, float16/bfloat16 reductions run in float32 (rounded once, so
//      results do not depend on the reduction order) unless the engine reduces them natively,
//      PREMUL_SUM scales before and AVG divides after a SUM;
//   5. the engine primitive runs (run_*), bounded by the deadline;
//   6. results are copied back and the Work completes with the seed's future value (SPEC B.2).
// A failure or timeout completes the Work with an error that names the op, group, sequence number and
// elapsed time and, when the group has a store, the ranks that never entered the op (they publish their
// progress while they wait; see progress_key()). The error is sticky: the group is then broken and later
// calls throw CommError naming the first failure.
//
// Point-to-point ops are not queued: send/recv are posted at once through post_send/post_recv so that a
// pending recv never blocks a later collective or send on the same group.
//
// Several lanes (the gloo `threads` option) let ops run concurrently: op n runs on lane n % lanes on every
// rank, so an engine can give each lane its own context/communicator (mpi, nccl) or share one among them
// and keep concurrent ops apart by sequence number (gloo's tags). barrier() first waits for every earlier
// op of every lane, so "barrier implies wait" holds.
//
// BRAID_DEBUG=DETAIL: before each collective the ranks exchange a fingerprint of (op, dtypes, shapes,
// root, reduce op); a mismatch fails the op on every rank with an error naming the ranks that differ.
//
// Thread-safety: public calls may come from any thread (see ProcessGroup for the ordering rule).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/deadline.h"
#include "collectives/checks.h"
#include "collectives/process_group.h"
#include "store/store.h"

namespace braid::collectives {

class SharedMemoryPool;
class SharedStaging;

// What a primitive needs to know about the op it serves.
struct OpContext {
  uint64_t seq = 0;
  std::string what;     // describe_op(...) e.g. "allreduce #3 on group 'world' (rank 0/2, mpi)"
  Deadline deadline = Deadline::never();
  int lane = 0;         // which engine context/communicator to use
  // reduce_scatter: the engine may overwrite the input (the caller's ReduceScatterOptions::input_is_scratch,
  // or a staging copy of it).
  bool input_is_scratch = false;
};

// Reduce ops as engines see them: AVG, PREMUL_SUM and bool are already rewritten by the base.
enum class EngineOp : uint8_t { SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR };
std::string_view engine_op_name(EngineOp op);  // "SUM", ... for engines' messages

class QueuedProcessGroup : public ProcessGroup {
 public:
  struct Config {
    int lanes = 1;
    // Optional: used for the ranks-that-never-joined report, monitored_barrier and BRAID_DEBUG=DETAIL.
    // Keys are written under "braid/pg/<group name>/".
    std::shared_ptr<store::Store> store;
    Millis timeout = kDefaultCollectiveTimeout;
    // BackendOptions::shared_memory_min_bytes.
    std::optional<int64_t> shared_min_bytes;
    // BackendOptions::shared_staging_max_bytes, and the engine's default when neither it nor
    // BRAID_SHM_STAGING_MAX_BYTES is set (0: broadcasts and allreduces go to the engine).
    std::optional<int64_t> shared_staging_max_bytes;
    int64_t shared_staging_default_max = 0;
    // Waiter mode (queued_process_group.cc, Lane and Watcher): an op nobody waits for is started by the
    // lane's thread once it has sat unclaimed this long and the watcher looks; the watcher looks every
    // unclaimed_after while it finds ops queued, and backs off to one look per look_gap_max while it finds
    // none. An op posted after a stretch of post-and-wait may so wait up to look_gap_max, unless the
    // caller posts another on its lane or waits for it first (either starts it at once).
    std::chrono::microseconds unclaimed_after{1000};
    std::chrono::microseconds look_gap_max{8000};
  };

  QueuedProcessGroup(int rank, int size, std::string name, Config config);
  // Derived destructors must call shutdown() first: lanes drain (every op still completes or times out)
  // and their threads are joined while the engine is still alive.
  ~QueuedProcessGroup() override;

  int lanes() const { return static_cast<int>(lanes_.size()); }

  std::shared_ptr<Work> broadcast(TensorList& tensors, const BroadcastOptions& options = {}) override;
  std::shared_ptr<Work> allreduce(TensorList& tensors, const AllreduceOptions& options = {}) override;
  std::shared_ptr<Work> allreduce_coalesced(TensorList& tensors, const AllreduceCoalescedOptions& options = {}) override;
  std::shared_ptr<Work> reduce(TensorList& tensors, const ReduceOptions& options = {}) override;
  std::shared_ptr<Work> allgather(std::vector<TensorList>& outputs, TensorList& inputs,
                                  const AllgatherOptions& options = {}) override;
  std::shared_ptr<Work> allgather_into_tensor(Tensor& output, Tensor& input, const AllgatherOptions& options = {}) override;
  std::shared_ptr<Work> allgather_coalesced(std::vector<TensorList>& outputs, TensorList& inputs,
                                            const AllgatherOptions& options = {}) override;
  std::shared_ptr<Work> gather(std::vector<TensorList>& outputs, TensorList& inputs,
                               const GatherOptions& options = {}) override;
  std::shared_ptr<Work> scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                const ScatterOptions& options = {}) override;
  std::shared_ptr<Work> reduce_scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                       const ReduceScatterOptions& options = {}) override;
  std::shared_ptr<Work> reduce_scatter_tensor(Tensor& output, Tensor& input,
                                              const ReduceScatterOptions& options = {}) override;
  std::shared_ptr<Work> alltoall(TensorList& outputs, TensorList& inputs, const AllToAllOptions& options = {}) override;
  std::shared_ptr<Work> alltoall_single(Tensor& output, Tensor& input, const std::vector<int64_t>& output_splits,
                                        const std::vector<int64_t>& input_splits,
                                        const AllToAllOptions& options = {}) override;
  std::shared_ptr<Work> send(TensorList& tensors, int dst_rank, int tag) override;
  std::shared_ptr<Work> recv(TensorList& tensors, int src_rank, int tag) override;
  std::shared_ptr<Work> recv_anysource(TensorList& tensors, int tag) override;
  std::shared_ptr<Work> barrier(const BarrierOptions& options = {}) override;

  // From the group's shared-memory pool when the group has a store, more than one rank, all of them on
  // this host, and BRAID_SHM_POOL_BYTES is not 0 (shared_memory_pool.h); ordinary memory otherwise, or
  // when the pool is full.
  Tensor empty_shared(const Shape& shape, DType dtype, Device device = Device::cpu()) override;
  // How many allreduces this rank ran through the pool (for tests and logs).
  uint64_t shared_allreduces() const { return shared_allreduces_.load(); }
  // How many broadcasts, allreduces, allgathers, alltoalls, reduce_scatters and barriers this rank ran
  // through the shared-memory staging (for tests and logs).
  uint64_t shared_broadcasts() const { return shared_broadcasts_.load(); }
  uint64_t staged_allreduces() const { return staged_allreduces_.load(); }
  uint64_t staged_allgathers() const { return staged_allgathers_.load(); }
  uint64_t staged_alltoalls() const { return staged_alltoalls_.load(); }
  uint64_t staged_reduce_scatters() const { return staged_reduce_scatters_.load(); }
  uint64_t staged_barriers() const { return staged_barriers_.load(); }

  // The key under which rank r publishes the sequence number of the op it is waiting in.
  std::string progress_key(int rank) const;

  // A barrier that names who did not come: every rank checks in through the store; rank 0 waits up to
  // `timeout` (the group's when unset) and fails with "Rank 2 failed to pass monitoredBarrier in 1000 ms"
  // (with wait_all_ranks: every missing rank, "Ranks 1, 3 failed ..."); the others then fail with rank 0's
  // message. Synchronous, like torch's. Needs Config::store.
  void monitored_barrier(std::optional<Millis> timeout = std::nullopt, bool wait_all_ranks = false) override;

 protected:
  // ---- Engine primitives. Run on lane ctx.lane's thread, in issue order; buffers are contiguous, dense,
  // on one device, of a dtype in engine_dtypes(); counts are in elements. Throw on failure; throw
  // TimeoutError when ctx.deadline passes (the base adds the missing-ranks report). ----
  virtual void run_broadcast(Tensor& buffer, int root, const OpContext& ctx) = 0;
  virtual void run_allreduce(Tensor& buffer, EngineOp op, const OpContext& ctx) = 0;
  // Only the root's buffer is defined afterwards.
  virtual void run_reduce(Tensor& buffer, EngineOp op, int root, const OpContext& ctx) = 0;
  // output holds size() * input.numel() elements, rank-major.
  virtual void run_allgather(const Tensor& input, Tensor& output, const OpContext& ctx) = 0;
  // The root's output holds size() * input.numel() elements; `output` is undefined on other ranks.
  virtual void run_gather(const Tensor& input, Tensor& output, int root, const OpContext& ctx) = 0;
  // The root's input holds size() * output.numel() elements; `input` is undefined on other ranks.
  virtual void run_scatter(const Tensor& input, Tensor& output, int root, const OpContext& ctx) = 0;
  // input holds size() * output.numel() elements; output receives block rank() of the reduction.
  virtual void run_reduce_scatter(const Tensor& input, Tensor& output, EngineOp op, const OpContext& ctx) = 0;
  // Block r of input (send_counts[r] elements at send_offsets[r]) goes to rank r; likewise for receiving.
  virtual void run_alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                            const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& recv_counts,
                            const std::vector<int64_t>& recv_offsets, const OpContext& ctx) = 0;
  virtual void run_barrier(const OpContext& ctx) = 0;
  // Posted from the calling thread; must not block. Complete `work` (finish / finish_with_error) when
  // done; for a recv, call work->set_source_rank(src) first. src == -1 means any source.
  virtual void post_send(const Tensor& buffer, int dst, int tag, std::shared_ptr<Work> work) = 0;
  virtual void post_recv(Tensor& buffer, int src, int tag, std::shared_ptr<Work> work) = 0;

  // Which dtypes the engine moves/reduces natively. The base converts others (bool -> uint8,
  // float16/bfloat16 -> float32 for reductions) before calling a primitive.
  virtual bool engine_reduces(DType dtype) const;
  // Whether tensors may live on CUDA (nccl) or on the CPU (mpi, gloo).
  virtual bool accepts_cuda() const { return false; }
  virtual bool accepts_cpu() const { return true; }
  // Where ops without tensors (barrier, the DETAIL fingerprint of a barrier) move their few bytes.
  virtual Device engine_device() const { return Device::cpu(); }
  // Refuses, at call time, a reduction the engine cannot do (after the generic checks::reduce_op):
  // e.g. NCCL has no bitwise reductions and no sparse allreduce. Throw through checks::fail.
  virtual void check_engine_reduce(const checks::Caller& /*caller*/, ReduceOp /*op*/, DType /*dtype*/,
                                   bool /*sparse*/) const {}

  // Stops accepting ops, drains and joins every lane. Idempotent.
  void shutdown();

  // Whether the calling thread runs the op for a thread blocked in Work::wait (the waiter itself), as
  // opposed to the lane's thread, which may share a core with the caller's own work. Engines may then
  // keep the core while they wait for the network instead of yielding it.
  static bool on_waiting_thread();

 private:
  struct Lane;
  struct Watcher;
  // What enqueue() needs besides the body: the op's name, its timeout, the device its tensors live on
  // and (BRAID_DEBUG=DETAIL only) a text that every rank must agree on.
  struct OpInfo {
    const char* op;
    std::optional<Millis> timeout;
    Device device = Device::cpu();
    std::string signature;
    // About how many bytes the op moves; small ops are waited for by spinning briefly (see Work).
    int64_t bytes = 0;
  };
  using Body = std::function<TensorList(const OpContext&)>;

  // Assigns seq and deadline, creates the Work and queues `body` on its lane; the Work completes with
  // body's result (or its error, enriched).
  std::shared_ptr<Work> enqueue(OpInfo info, Body body);
  void lane_loop(Lane& lane);
  void watch_loop();
  void run_op(const OpContext& ctx, const OpInfo& info, Body&& queued_body, Work& work);
  std::exception_ptr enrich_error(const OpContext& ctx, std::exception_ptr error, double elapsed_ms);
  checks::Caller caller(const char* op) const;
  std::string missing_ranks_report(uint64_t seq);
  void monitor_loop();
  void check_fingerprint(const OpContext& ctx, const OpInfo& info);
  void throw_if_unusable(const char* op) const;
  std::vector<std::shared_ptr<Work>> incomplete_works();
  // Posts a p2p op, staging a non-contiguous tensor through a packed buffer.
  std::shared_ptr<Work> post_p2p(const char* op, TensorList& tensors, int peer, int tag, bool is_send);
  // The pool for ops with sequence number `seq` and later (null: none yet, or none for this op).
  std::shared_ptr<SharedMemoryPool> shared_pool_for(uint64_t seq);
  // An allreduce through the pool when every rank's buffer is in it (shared_allreduce.h), else through the
  // staging (staged_allreduce.h) when staging_for() gives one; false: run the engine's.
  bool try_shared_allreduce(Tensor& buffer, EngineOp op, const OpContext& ctx);
  // A broadcast through the staging (shared_broadcast.h) when staging_for() gives one; false: run the
  // engine's.
  bool try_shared_broadcast(Tensor& buffer, int root, const OpContext& ctx);
  // The allgather, alltoall and reduce_scatter of the collectives' flat buffers: through the staging
  // (staged_allgather.h, staged_alltoall.h, staged_reduce_scatter.h) when it takes them, else the engine's.
  void allgather_flat(const Tensor& input, Tensor& output, const OpContext& ctx);
  void alltoall_flat(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                     const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& recv_counts,
                     const std::vector<int64_t>& recv_offsets, const OpContext& ctx);
  void reduce_scatter_flat(const Tensor& input, Tensor& output, EngineOp op, const OpContext& ctx);
  // A barrier through the staging (staged_barrier.h) when the engine's device is the CPU and staging_on()
  // gives one; false: run the engine's.
  bool try_staged_barrier(const OpContext& ctx);
  // The group's staging for an op on `buffer`, when the engine allows it, the buffer is on the CPU and not
  // above the maximum, and every rank is on this host; null: the engine's. The first call sets the staging
  // up, collectively.
  SharedStaging* staging_for(const Tensor& buffer, const OpContext& ctx);
  // The same for an op whose size may differ from rank to rank (alltoall), checked by the op itself.
  SharedStaging* staging_on(Device device, const OpContext& ctx);
  // Sparse COO allreduce (SUM): allgather of nnz counts, then of padded indices and values.
  TensorList sparse_allreduce(const TensorList& tensors, const OpContext& ctx);

  Config config_;
  bool detail_ = false;  // BRAID_DEBUG=DETAIL
  size_t shared_pool_bytes_;           // BRAID_SHM_POOL_BYTES
  int64_t shared_min_bytes_;           // BRAID_SHM_ALLREDUCE_MIN_BYTES
  std::mutex pool_mu_;
  bool pool_tried_ = false;                  // GUARDED_BY(pool_mu_)
  std::shared_ptr<SharedMemoryPool> pool_;   // GUARDED_BY(pool_mu_)
  uint64_t pool_first_seq_ = 0;              // GUARDED_BY(pool_mu_)
  std::atomic<uint64_t> shared_allreduces_{0};
  int64_t shared_staging_max_;                   // BRAID_SHM_STAGING_MAX_BYTES
  std::mutex staging_mu_;
  bool staging_tried_ = false;                     // GUARDED_BY(staging_mu_)
  std::unique_ptr<SharedStaging> staging_;         // GUARDED_BY(staging_mu_) until staging_tried_
  std::atomic<uint64_t> shared_broadcasts_{0};
  std::atomic<uint64_t> staged_allreduces_{0};
  std::atomic<uint64_t> staged_allgathers_{0};
  std::atomic<uint64_t> staged_alltoalls_{0};
  std::atomic<uint64_t> staged_reduce_scatters_{0};
  std::atomic<uint64_t> staged_barriers_{0};
  std::shared_ptr<Watcher> watcher_;          // one thread for every lane's waiter-mode looks
  std::vector<std::shared_ptr<Lane>> lanes_;  // shared with the Works they run (Work::Helper)
  std::thread monitor_;
  std::condition_variable monitor_cv_;
  uint64_t published_seq_ = 0;  // guarded by mu_
  std::atomic<uint64_t> monitored_barriers_{0};
  mutable std::mutex mu_;
  std::string broken_;  // the first failure, once the group is broken
  bool stopping_ = false;
  // Works that may not be complete yet, for barrier's "implies wait".
  std::vector<std::weak_ptr<Work>> in_flight_;
};

}  // namespace braid::collectives
