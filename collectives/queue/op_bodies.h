// The bodies of the collectives: what runs on a lane for each op, after the group checked its arguments.
// Each packs the caller's tensors into flat buffers (flat_buffers.h), rewrites what engines do not see
// (PREMUL_SUM scales before and AVG divides after a SUM; bool and half types change dtype), runs the
// primitive through the router (engine_router.h) and copies the results back. Each returns what the op's
// Work holds afterwards: torch's future value for that op.
#pragma once

#include <memory>
#include <vector>

#include "collectives/core/calls.h"
#include "collectives/queue/engine_router.h"

namespace braid::collectives::bodies {

// What every body needs besides its tensors.
struct Env {
  EngineRouter& router;
  int rank;
  int size;
};

TensorList broadcast(const Env& env, const TensorList& ts, int root, size_t root_tensor, const OpContext& ctx);
TensorList allreduce(const Env& env, const TensorList& ts, ReduceOp op, const OpContext& ctx);
// Sparse COO allreduce (SUM): allgather of nnz counts, then of padded indices and values.
TensorList sparse_allreduce(const Env& env, const TensorList& ts, const OpContext& ctx);
TensorList allreduce_coalesced(const Env& env, const TensorList& ts, ReduceOp op, const OpContext& ctx);
TensorList reduce(const Env& env, const TensorList& ts, ReduceOp op, int root, const OpContext& ctx);
TensorList allgather(const Env& env, const std::vector<TensorList>& outs, const TensorList& ins, const OpContext& ctx);
TensorList allgather_into_tensor(const Env& env, const Tensor& output, const Tensor& input, const OpContext& ctx);
TensorList allgather_coalesced(const Env& env, const std::vector<TensorList>& outs, const TensorList& ins,
                               const OpContext& ctx);
// Every pair in one engine op: rank r's block of the gathered buffer holds its inputs in order, and output i
// takes piece i of every block.
TensorList allgather_into_tensor_coalesced(const Env& env, const TensorList& outs, const TensorList& ins,
                                           const OpContext& ctx);
TensorList gather(const Env& env, const std::vector<TensorList>& outs, const TensorList& ins, int root,
                  const OpContext& ctx);
TensorList scatter(const Env& env, const TensorList& outs, const std::vector<TensorList>& ins, int root,
                   const OpContext& ctx);
TensorList reduce_scatter(const Env& env, const TensorList& outs, const TensorList& ins, ReduceOp op,
                          const OpContext& ctx);
TensorList reduce_scatter_tensor(const Env& env, const Tensor& output, const Tensor& input, ReduceOp op,
                                 bool input_is_scratch, const OpContext& ctx);
// Every pair in one engine op: the inputs are interleaved into one buffer whose chunk r holds chunk r of
// every input, in order, so that rank r's share of the reduction is its outputs, in order.
TensorList reduce_scatter_tensor_coalesced(const Env& env, const TensorList& outs, const TensorList& ins, ReduceOp op,
                                           const OpContext& ctx);
TensorList alltoall(const Env& env, const TensorList& outs, const TensorList& ins, const OpContext& ctx);
// Element counts and offsets of every rank's piece, as the group worked them out from the splits.
struct AlltoallLayout {
  std::vector<int64_t> send_counts, send_offsets, recv_counts, recv_offsets;
};
TensorList alltoall_single(const Env& env, const Tensor& output, const Tensor& input, const AlltoallLayout& layout,
                           const OpContext& ctx);
// Waits for every op issued before (on any lane), then runs the barrier.
TensorList barrier(const Env& env, const std::vector<std::shared_ptr<Work>>& earlier, const OpContext& ctx);

}  // namespace braid::collectives::bodies
