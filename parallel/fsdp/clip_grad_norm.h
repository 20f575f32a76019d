// clip_grad_norm_ for a module whose parameters FSDP manages: torch's FullyShardedDataParallel.clip_grad_norm_.
//
// A sharded parameter's .grad is only this rank's rows, so the norm is a sum over ranks: each rank sums
// |g|^p over its shards, the sums are allreduced (one allreduce per distinct group, in the order the
// groups first appear in module.parameters()), and gradients that are replicated (NO_SHARD units, or
// parameters no unit manages) are added once, locally. The infinity norm uses MAX instead of SUM.
// Collective: every rank of every group involved must call it.
#pragma once

#include "nn/module.h"

namespace braid::parallel::fsdp {

// Scales every gradient of module.parameters() by max_norm / (total_norm + 1e-6) when that is below one.
// Returns the total norm (float64) of all gradients as if unsharded. norm_type: any p > 0, or infinity.
double clip_grad_norm_(nn::Module& module, double max_norm, double norm_type = 2.0);

}  // namespace braid::parallel::fsdp
