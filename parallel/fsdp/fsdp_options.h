// Options of fully_shard(), following PyTorch's FSDP names.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "collectives/core/process_group.h"
#include "tensor/dtype.h"

namespace braid::parallel::fsdp {

enum class ShardingStrategy {
  // Parameters, gradients (and so optimizer state) sharded; parameters gathered for forward, freed after
  // it, gathered again for backward.
  FULL_SHARD,
  // Like FULL_SHARD, but the gathered parameters stay from forward until the unit's backward is done
  // (reshard_after_forward = false): one all-gather per step instead of two, more memory.
  SHARD_GRAD_OP,
  // No sharding: full parameters on every rank, gradients averaged with an allreduce (DDP's result).
  NO_SHARD,
  // FULL_SHARD inside `group` (e.g. the ranks of one node), replicated across `replicate_group` (the ranks
  // holding the same shard on the other nodes): gradients are reduce-scattered in the group, then the
  // shards allreduced across the replicas, averaged over both.
  HYBRID_SHARD,
};

std::string to_string(ShardingStrategy s);

// PyTorch FSDP2's MixedPrecisionPolicy. Shards (and so the optimizer) stay in the parameters' own dtype.
struct MixedPrecision {
  // The dtype of the gathered parameters, which forward and backward compute in (sharded strategies only).
  std::optional<DType> param_dtype;
  // The dtype gradients are reduced in; default: param_dtype (or the parameters' dtype). Shard gradients
  // are cast back to the parameters' dtype.
  std::optional<DType> reduce_dtype;
  // The unit's floating forward outputs are cast to it (differentiably); default: left as computed.
  std::optional<DType> output_dtype;
  // Floating forward inputs are cast to param_dtype (differentiably), as PyTorch does by default.
  bool cast_forward_inputs = true;
};

struct FSDPOptions {
  ShardingStrategy strategy = ShardingStrategy::FULL_SHARD;
  // Overrides the strategy's choice (true for FULL_SHARD and HYBRID_SHARD, false for SHARD_GRAD_OP);
  // ignored for NO_SHARD.
  std::optional<bool> reshard_after_forward;
  // HYBRID_SHARD only (required there): the ranks that hold the same shard as this one, this rank included.
  std::shared_ptr<collectives::ProcessGroup> replicate_group;
  MixedPrecision mixed_precision;
  // Broadcasts rank 0's values of the unit's parameters and buffers over the group before sharding, so
  // that ranks whose models were initialised differently start equal (torch's sync_module_states).
  bool sync_module_states = false;
  // Forward prefetch (torch's forward_prefetch): the units of one root record the order their forwards ran
  // in during the first step; from then on each unit issues the next unit's all-gather right after its
  // own, so it travels while this unit computes. Assumes the same order every step (a static graph).
  bool forward_prefetch = false;
  // Backward prefetch (torch's BackwardPrefetch.BACKWARD_PRE): with the same recorded order, a unit's
  // pre-backward starts the all-gather of the unit whose forward came before it, whose backward is next.
  bool backward_prefetch = false;
  // CPU offload (torch's CPUOffload(offload_params=True)): the parameter shards, and so their gradients
  // and any optimizer state made from them, live in host memory between uses. Forward and backward gather
  // them onto the parameters' device at fully_shard time (the unit's compute device, a GPU), and the
  // gradient shards come back to the host, where the optimizer steps. Needs a sharded strategy. With CPU
  // parameters there is nothing to move: accepted, no effect.
  bool offload_params = false;

  bool resolved_reshard_after_forward() const {
    if (strategy == ShardingStrategy::NO_SHARD) return false;
    return reshard_after_forward.value_or(strategy != ShardingStrategy::SHARD_GRAD_OP);
  }
};

}  // namespace braid::parallel::fsdp
