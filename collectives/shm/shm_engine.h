// ShmEngine: the collectives of one host's ranks through shared memory, an engine in its own right
// (core/engine.h). It holds two things, each set up collectively by the first op that needs it:
//   * the pool (memory_pool.h) behind ProcessGroup::empty_shared, through which an allreduce of buffers
//     that every rank took from it reduces in place (pool_allreduce.h);
//   * the staging area (staging_area.h), two blocks per lane and rank through which broadcast, allreduce,
//     allgather, alltoall, reduce_scatter and barrier move ordinary CPU buffers chunk by chunk
//     (broadcast.h, allreduce.h, allgather.h, alltoall.h, reduce_scatter.h, barrier.h).
// It takes only what the group's policy sends it (queue/engine_policy.h) and declines, on every rank
// alike, what it cannot run after all: ranks on several hosts, a lane beyond MemoryPool::kMaxLanes, an
// allreduce whose buffers are not all in the pool and larger than the staging takes, an alltoall whose
// largest input is. reduce, gather, scatter and point-to-point are not its ops.
//
// Counters (counters()): "pool_allreduce", "broadcast", "allreduce", "allgather", "alltoall",
// "reduce_scatter", "barrier": the ops this rank ran through the pool or the staging.
//
// Thread-safety: as Engine; the first op of any lane may set up the staging while another waits for it.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "collectives/core/engine.h"
#include "store/store.h"

namespace braid::collectives::shm {

class MemoryPool;
class StagingArea;

class ShmEngine final : public Engine {
 public:
  struct Limits {
    int64_t staging_max_bytes = 0;  // the largest op through the staging area (0: none)
    int64_t pool_min_bytes = 0;     // the smallest allreduce through the pool
    size_t pool_bytes = 0;          // each rank's pool segment (0: no pool)
  };
  // `store`: the group's (required); `lanes`: the group's lane count.
  ShmEngine(GroupShape shape, std::shared_ptr<store::Store> store, int lanes, Millis timeout, Limits limits);
  ~ShmEngine() override;

  std::string_view name() const override { return "shm"; }
  int lanes() const override { return lanes_; }

  bool broadcast(Tensor& buffer, int root, const OpContext& ctx) override;
  bool allreduce(Tensor& buffer, EngineOp op, const OpContext& ctx) override;
  bool reduce(Tensor&, EngineOp, int, const OpContext&) override { return false; }
  bool allgather(const Tensor& input, Tensor& output, const OpContext& ctx) override;
  bool gather(const Tensor&, Tensor&, int, const OpContext&) override { return false; }
  bool scatter(const Tensor&, Tensor&, int, const OpContext&) override { return false; }
  bool reduce_scatter(const Tensor& input, Tensor& output, EngineOp op, const OpContext& ctx) override;
  bool alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& recv_counts,
                const std::vector<int64_t>& recv_offsets, const OpContext& ctx) override;
  bool barrier(const OpContext& ctx) override;
  // Not an engine for point-to-point: the group never posts them here.
  void post_send(const Tensor& buffer, int dst, int tag, const Deadline& deadline,
                 std::shared_ptr<Work> work) override;
  void post_recv(Tensor& buffer, int src, int tag, const Deadline& deadline, std::shared_ptr<Work> work) override;

  // float32 and float64, and SUM only (reduces_op).
  bool reduces(DType dtype) const override { return dtype == DType::Float32 || dtype == DType::Float64; }

  std::shared_ptr<Storage> allocate_shared(size_t nbytes, uint64_t first_seq) override;
  std::vector<std::pair<std::string, uint64_t>> counters() const override;

 private:
  enum Counter { kPoolAllreduce, kBroadcast, kAllreduce, kAllgather, kAlltoall, kReduceScatter, kBarrier, kCounters };

  // The pool for ops with sequence number `seq` and later (null: none yet).
  std::shared_ptr<MemoryPool> pool_for(uint64_t seq);
  // The staging area for an op on `buffer` (not above the maximum, not empty); null: decline.
  StagingArea* staging_for(const Tensor& buffer, const OpContext& ctx);
  // The same for an op whose size may differ from rank to rank (alltoall), checked by the op itself.
  StagingArea* staging(const OpContext& ctx);

  const GroupShape shape_;
  const std::shared_ptr<store::Store> store_;
  const int lanes_;
  const Millis timeout_;
  const Limits limits_;
  std::mutex pool_mu_;
  bool pool_tried_ = false;              // GUARDED_BY(pool_mu_)
  std::shared_ptr<MemoryPool> pool_;     // GUARDED_BY(pool_mu_)
  uint64_t pool_first_seq_ = 0;          // GUARDED_BY(pool_mu_)
  std::mutex staging_mu_;
  bool staging_tried_ = false;                 // GUARDED_BY(staging_mu_)
  std::unique_ptr<StagingArea> staging_;       // GUARDED_BY(staging_mu_) until staging_tried_
  std::atomic<uint64_t> counts_[kCounters] = {};
};

}  // namespace braid::collectives::shm
