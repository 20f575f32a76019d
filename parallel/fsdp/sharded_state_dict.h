// Sharded state dicts and their reload on another number of ranks, without communication.
//
// Between steps module.state_dict() of a sharded module is this rank's shard of every parameter (rows of
// dim 0, unpadded) plus the buffers — a sharded state dict; each rank saves its own (nn::save_state_dict).
// Because the shards are unpadded rows in rank order, the N dicts concatenated along dim 0 give the full
// tensors. load_sharded_state_dicts() takes all N ranks' dicts (read from N files) and loads each rank's
// part into a module sharded over any M ranks, or into a plain module (M = 1, no FSDP at all):
//
//   nn::save_state_dict(model->state_dict(), fmt::format("ckpt/rank{}.brsd", rank));   // on N ranks
//   std::vector<nn::StateDict> all;                                                      // later, M ranks
//   for (int r = 0; r < N; ++r) all.push_back(nn::load_state_dict_file(fmt::format("ckpt/rank{}.brsd", r)));
//   fsdp::load_sharded_state_dicts(*model, all);
#pragma once

#include <vector>

#include "nn/module.h"

namespace braid::parallel::fsdp {

// Per key of module.state_dict(): when the N entries' rows add up to the full tensor's rows, they are
// concatenated (sharded when saved); when each entry is the full tensor, rank 0's is used (replicated: a
// NO_SHARD unit, a parameter no unit managed, a buffer). This rank's rows (all of them when its parameter
// is not sharded) are copied in. strict: every key must be in every dict, and no dict may have others;
// errors name the key, the rank of the dict and the shapes. Nothing is loaded when a check fails.
void load_sharded_state_dicts(nn::Module& module, const std::vector<nn::StateDict>& by_rank, bool strict = true);

}  // namespace braid::parallel::fsdp
