// Options of fully_shard(), following PyTorch's FSDP names.
#pragma once

#include <optional>
#include <string>

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
};

std::string to_string(ShardingStrategy s);

struct FSDPOptions {
  ShardingStrategy strategy = ShardingStrategy::FULL_SHARD;
  // Overrides the strategy's choice (true for FULL_SHARD, false for SHARD_GRAD_OP); ignored for NO_SHARD.
  std::optional<bool> reshard_after_forward;

  bool resolved_reshard_after_forward() const {
    if (strategy == ShardingStrategy::NO_SHARD) return false;
    return reshard_after_forward.value_or(strategy == ShardingStrategy::FULL_SHARD);
  }
};

}  // namespace braid::parallel::fsdp
