// The job file's training options as the library's option structs: DDP, FSDP, the local optimizer and the
// remote parts' optimizer.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/core/process_group.h"
#include "dist_autograd/local_optimizer.h"
#include "nn/module.h"
#include "nn/optim/optimizer.h"
#include "parallel/ddp/ddp.h"
#include "runtime/job/job_spec.h"

namespace braid::runtime {

parallel::DDPOptions make_ddp_options(const DdpSpec& ddp, std::shared_ptr<collectives::ProcessGroup> group);

// The groups FSDP's HYBRID_SHARD reduces over: this trainer's shard group and its replicate group (null for
// the other strategies). Made by every rank, in the same order, at start-up (JobRuntime).
struct HybridShardGroups {
  std::shared_ptr<collectives::ProcessGroup> shard;
  std::shared_ptr<collectives::ProcessGroup> replicate;
};

// fully_shard on each fsdp.wrap child (dotted path), then on the root, over `group` (the trainers), or for
// hybrid_shard over hybrid.shard, replicated over hybrid.replicate. InvalidArgument naming a wrap path the
// model does not have.
void apply_fsdp(nn::Module& model, const FsdpSpec& fsdp, std::shared_ptr<collectives::ProcessGroup> group,
                const HybridShardGroups& hybrid = {});

// The optimizer over `params`; null for optimizer.kind none.
std::unique_ptr<nn::optim::Optimizer> make_local_optimizer(const OptimizerSpec& spec,
                                                           const std::vector<std::pair<std::string, Tensor>>& params);
// The same options for a DistributedOptimizer. InvalidArgument for kind none.
dist_autograd::OptimizerOptions remote_optimizer_options(const OptimizerSpec& spec);

}  // namespace braid::runtime
