#include "runtime/run/train_options.h"

#include "base/check.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "parallel/fsdp/fully_shard.h"

namespace braid::runtime {

parallel::DDPOptions make_ddp_options(const DdpSpec& ddp, std::shared_ptr<collectives::ProcessGroup> group) {
  parallel::DDPOptions o;
  o.process_group = std::move(group);
  o.bucket_cap_mb = ddp.bucket_cap_mb;
  o.gradient_as_bucket_view = ddp.gradient_as_bucket_view;
  o.find_unused_parameters = ddp.find_unused_parameters;
  o.static_graph = ddp.static_graph;
  return o;
}

namespace {

parallel::fsdp::ShardingStrategy strategy_of(ShardingStrategy s) {
  switch (s) {
    case ShardingStrategy::FullShard: return parallel::fsdp::ShardingStrategy::FULL_SHARD;
    case ShardingStrategy::ShardGradOp: return parallel::fsdp::ShardingStrategy::SHARD_GRAD_OP;
    case ShardingStrategy::NoShard: return parallel::fsdp::ShardingStrategy::NO_SHARD;
    case ShardingStrategy::HybridShard: return parallel::fsdp::ShardingStrategy::HYBRID_SHARD;
  }
  return parallel::fsdp::ShardingStrategy::FULL_SHARD;
}

std::optional<DType> dtype_of(const std::optional<std::string>& name, const char* key) {
  if (!name) return std::nullopt;
  const auto d = dtype_from_name(*name);
  BRAID_CHECK_ARG(d.has_value(), "{}: unknown dtype '{}'", key, *name);
  return d;
}

}  // namespace

void apply_fsdp(nn::Module& model, const FsdpSpec& fsdp, std::shared_ptr<collectives::ProcessGroup> group,
                const HybridShardGroups& hybrid) {
  parallel::fsdp::FSDPOptions o;
  o.strategy = strategy_of(fsdp.sharding_strategy);
  if (fsdp.sharding_strategy == ShardingStrategy::HybridShard) {
    BRAID_CHECK_ARG(hybrid.shard && hybrid.replicate,
                    "fsdp.sharding_strategy: hybrid_shard without its shard and replicate groups (internal: "
                    "JobRuntime makes them when fsdp.shard_group_size is set)");
    group = hybrid.shard;
    o.replicate_group = hybrid.replicate;
  }
  o.mixed_precision.param_dtype = dtype_of(fsdp.param_dtype, "fsdp.param_dtype");
  o.mixed_precision.reduce_dtype = dtype_of(fsdp.reduce_dtype, "fsdp.reduce_dtype");
  for (const std::string& path : fsdp.wrap) {
    nn::Module* found = nullptr;
    for (auto& [name, m] : model.named_modules()) {
      if (name == path) found = m;
    }
    BRAID_CHECK_ARG(found != nullptr, "fsdp.wrap: the model has no sub-module '{}'", path);
    parallel::fsdp::fully_shard(*found, group, o, path);
  }
  parallel::fsdp::fully_shard(model, group, o, "root");
}

std::unique_ptr<nn::optim::Optimizer> make_local_optimizer(const OptimizerSpec& spec,
                                                           const std::vector<std::pair<std::string, Tensor>>& params) {
  if (spec.kind == OptimizerKind::None || params.empty()) return nullptr;
  return dist_autograd::make_optimizer(remote_optimizer_options(spec), [&] {
    nn::TensorList list;
    for (const auto& [name, p] : params) list.push_back(p);
    return list;
  }());
}

dist_autograd::OptimizerOptions remote_optimizer_options(const OptimizerSpec& spec) {
  switch (spec.kind) {
    case OptimizerKind::Sgd:
      return nn::optim::SGDOptions{.lr = spec.lr, .momentum = spec.momentum, .weight_decay = spec.weight_decay};
    case OptimizerKind::Adam:
      return nn::optim::AdamOptions{.lr = spec.lr, .beta1 = spec.beta1, .beta2 = spec.beta2, .eps = spec.eps,
                                    .weight_decay = spec.weight_decay};
    case OptimizerKind::AdamW:
      return nn::optim::AdamWOptions{.lr = spec.lr, .beta1 = spec.beta1, .beta2 = spec.beta2, .eps = spec.eps,
                                     .weight_decay = spec.weight_decay};
    case OptimizerKind::None: break;
  }
  BRAID_THROW(InvalidArgument, "optimizer.kind: none has no optimizer options");
}

}  // namespace braid::runtime
