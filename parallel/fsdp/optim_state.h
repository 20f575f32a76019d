// Optimizer state dicts of sharded parameters, in full form (torch's FSDP.full_optim_state_dict).
//
// An optimizer built on a sharded module keeps shard-shaped state ("exp_avg" of a shard is the shard's
// shape). full_optim_state_dict() gathers every such tensor to the parameter's full shape, so the dict
// equals the one an optimizer on the unsharded model would have, and does not depend on the world size;
// load_full_optim_state_dict() cuts this rank's rows back out, for any number of ranks.
#pragma once

#include "nn/optim/optimizer.h"

namespace braid::parallel::fsdp {

// Collective over the groups of the units managing the optimizer's parameters (one all-gather per state
// tensor of a sharded parameter, in parameter order, then state name order). The result holds the full
// state on rank 0 of each parameter's group when rank0_only (other ranks: entries of unsharded
// parameters only, none of the gathered ones), on every rank otherwise. Scalars ("step") stay as they are.
nn::optim::OptimizerStateDict full_optim_state_dict(const nn::optim::Optimizer& optimizer, bool rank0_only = true);

// Loads a full optimizer state dict (every rank passes the same one) into an optimizer over sharded
// parameters: state tensors of a sharded parameter are cut to this rank's rows. No communication.
void load_full_optim_state_dict(nn::optim::Optimizer& optimizer, const nn::optim::OptimizerStateDict& full);

}  // namespace braid::parallel::fsdp
