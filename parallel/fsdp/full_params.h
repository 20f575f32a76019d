// Full parameters outside a training step: summon_full_params (a guard) and full state dicts.
//
//   {
//     fsdp::SummonFullParams full(*model);         // collective: every unit of the tree all-gathers
//     print(model->named_parameters());            // full tensors
//   }                                              // back to shards (writeback copies edits into them)
//
//   nn::StateDict sd = fsdp::full_state_dict(*model);      // rank 0: full tensors on the CPU; others: empty
//   fsdp::load_full_state_dict(*model, sd_on_every_rank);  // any world size: shards are cut on load
//
// A full state dict does not depend on the world size, so a model saved from N ranks loads on M ranks.
// Collective over every unit's group: all ranks call these for the same module, in the same order.
#pragma once

#include <memory>
#include <vector>

#include "nn/module.h"

namespace braid::parallel::fsdp {

class FSDPUnit;

class SummonFullParams {
 public:
  // writeback: on exit, each rank copies its rows of the (possibly edited) full parameters into its shards.
  // Every rank sees the same full values unless someone edits them differently per rank.
  explicit SummonFullParams(nn::Module& module, bool writeback = true);
  // Reshards (no communication, so it cannot hang or fail remotely). Units that were already full on entry
  // (SHARD_GRAD_OP between forward and backward) stay full.
  ~SummonFullParams();
  SummonFullParams(const SummonFullParams&) = delete;
  SummonFullParams& operator=(const SummonFullParams&) = delete;

 private:
  bool writeback_;
  std::vector<std::shared_ptr<FSDPUnit>> unsharded_here_;
};

// The module's state dict with full parameters, cloned to the CPU: on rank 0 of the root unit's group when
// rank0_only, on every rank otherwise (the others get an empty dict). Buffers are not sharded and are copied
// as they are.
nn::StateDict full_state_dict(nn::Module& module, bool rank0_only = true);

// Loads a full state dict (every rank passes the same one) into a sharded module: parameters are
// unsharded, loaded with Module::load_state_dict (strict), and written back into each rank's shards.
void load_full_state_dict(nn::Module& module, const nn::StateDict& state, bool strict = true);

}  // namespace braid::parallel::fsdp
