// HierEngine: collectives in two levels, for groups whose ranks span hosts with more than one rank on some
// host (core/host_layout.h). It is an engine (core/engine.h) composed of other engines, which the registry
// builds (registry/engine_factory.h) and hands over; it includes none of them:
//   * the local level, over this host's ranks: the shared-memory engine first and the network engine of
//     the same kind over the same ranks where that one declines or is not chosen, routed by an
//     EngineRouter with the group's policy (queue/engine_router.h; each step is in the debug log), and
//     for reduce_scatter steps with Parts::local_scatter_policy;
//   * the cross level, over the ranks with this rank's local rank, one per host (ascending by host): the
//     network engine of the group's kind.
// A host with one rank has no local engines, and a local rank that only one host has no cross engine.
//
// Algorithms (S: the op's bytes, L: ranks per host, H: hosts):
//   allreduce, every host L ranks, count >= L: by slices. A local reduce_scatter leaves each local rank
//     the host's sum of its 1/L slice, the ranks with the same local rank allreduce that slice across
//     hosts, a local allgather puts the slices together. Each host sends 2(H-1)/H * S over the network,
//     split over L ranks (a flat ring over all H*L ranks sends 2(H*L-1)/(H*L) * S per rank, most of it
//     across hosts). The count % L elements at the end go by leaders (below).
//   allreduce otherwise: by leaders. A local allreduce, the local ranks 0 allreduce across hosts, a local
//     broadcast from local rank 0.
//   reduce_scatter (every host L ranks): a local reduce_scatter of the input with its blocks reordered so
//     that local rank i gets the host's sum of the blocks of every host's local rank i, then a cross
//     reduce_scatter of those H blocks. The reordering copies the input once unless the group's ranks
//     are numbered local-rank-major (rank = i * H + host).
//   allgather (every host L ranks): a cross allgather of the input, a local allgather of the H blocks, and
//     a copy into rank order (again none for local-rank-major numbering).
//   broadcast: the root's local rank across hosts, then from it inside each host; by local ranks 0 when
//     some host has no rank with the root's local rank.
// reduce_scatter and allgather on hosts with different numbers of ranks, and every other op, are declined
// (every rank sees the same layout, so every rank declines alike) and the network engine runs them.
//
// Same bits on every rank: a reduced element is summed inside each host by one rank (the local engine's
// reduce_scatter or allreduce, in rank order on shared memory), then across hosts by the cross engine,
// which gives its members the same result; everything after that only copies it.
//
// Sub-steps: each runs on its engine with the op's lane and deadline, sequence number seq * 8 + step (gloo
// tags its messages with it, and two steps on one engine must not share a tag), and a description that
// names the step ("allreduce #7 on group 'world' (rank 0/4, gloo) [two levels: cross allreduce]").
//
// Counters: "allreduce_slices", "allreduce_leaders", "reduce_scatter", "allgather", "broadcast".
// Thread-safety: as Engine; each lane has its own scratch buffers.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/core/engine.h"
#include "collectives/core/host_layout.h"
#include "collectives/queue/engine_policy.h"
#include "collectives/queue/engine_router.h"

namespace braid::collectives::hier {

class HierEngine final : public Engine {
 public:
  struct Parts {
    HostLayout layout;
    // The network engine over this host's ranks (null when this host has one rank) and the shared-memory
    // engine over them (may be null), and the policy that chooses between them.
    std::unique_ptr<Engine> local_network;
    std::unique_ptr<Engine> local_shm;
    EnginePolicy local_policy;
    // The same for the local reduce_scatter steps, which may allow the shared memory larger ops: on mpi,
    // Open MPI's reduce_scatter of 8 MiB and more is an allreduce of the whole input (mpi/README.md), and
    // the staging's took a quarter of its time at 16 MiB on 2 ranks.
    EnginePolicy local_scatter_policy;
    // The network engine over ranks_with_local_rank(this rank's local rank) (null when that is only this rank).
    std::unique_ptr<Engine> cross;
  };
  // `lanes`: the group's; every engine in `parts` serves as many.
  HierEngine(GroupShape shape, int lanes, Parts parts);
  ~HierEngine() override;

  std::string_view name() const override { return "hier"; }
  int lanes() const override { return lanes_; }

  bool broadcast(Tensor& buffer, int root, const OpContext& ctx) override;
  bool allreduce(Tensor& buffer, EngineOp op, const OpContext& ctx) override;
  bool allgather(const Tensor& input, Tensor& output, const OpContext& ctx) override;
  bool reduce_scatter(const Tensor& input, Tensor& output, EngineOp op, const OpContext& ctx) override;
  bool reduce(Tensor&, EngineOp, int, const OpContext&) override { return false; }
  bool gather(const Tensor&, Tensor&, int, const OpContext&) override { return false; }
  bool scatter(const Tensor&, Tensor&, int, const OpContext&) override { return false; }
  bool alltoall(const Tensor&, Tensor&, const std::vector<int64_t>&, const std::vector<int64_t>&,
                const std::vector<int64_t>&, const std::vector<int64_t>&, const OpContext&) override {
    return false;
  }
  bool barrier(const OpContext&) override { return false; }
  // Not an engine for point-to-point: the group posts them on its network engine.
  void post_send(const Tensor& buffer, int dst, int tag, const Deadline& deadline,
                 std::shared_ptr<Work> work) override;
  void post_recv(Tensor& buffer, int src, int tag, const Deadline& deadline, std::shared_ptr<Work> work) override;

  std::vector<std::pair<std::string, uint64_t>> counters() const override;
  const HostLayout& layout() const { return layout_; }

 private:
  enum Counter { kAllreduceSlices, kAllreduceLeaders, kReduceScatter, kAllgather, kBroadcast, kCounters };

  // The context of sub-step `step` of the op.
  static OpContext step(const OpContext& ctx, int step, const char* what);
  // A flat buffer of `numel` elements of `dtype` owned by `lane` (reused by its later ops).
  Tensor scratch(int lane, int slot, int64_t numel, DType dtype);
  void allreduce_by_leaders(Tensor& buffer, EngineOp op, const OpContext& ctx, int first_step);
  void local_broadcast(Tensor& buffer, int local_root, const OpContext& ctx);

  const GroupShape shape_;
  const int lanes_;
  const HostLayout layout_;
  const int host_;
  const int local_rank_;
  const int local_size_;
  const bool uniform_;
  // rank r's place in the rank order a local-then-cross gather produces: local_rank * H + host.
  bool local_rank_major_ = true;
  std::unique_ptr<Engine> local_network_;
  std::unique_ptr<Engine> local_shm_;
  std::unique_ptr<Engine> cross_;
  std::unique_ptr<EngineRouter> local_;          // null when this host has one rank
  std::unique_ptr<EngineRouter> local_scatter_;  // the local reduce_scatter steps (Parts::local_scatter_policy)
  std::vector<std::vector<Tensor>> scratch_;  // [lane][slot]
  std::atomic<uint64_t> counts_[kCounters] = {};
};

}  // namespace braid::collectives::hier
