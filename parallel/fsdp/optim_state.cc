#include "parallel/fsdp/optim_state.h"

#include "autograd/grad_mode.h"
#include "base/check.h"
#include "base/error.h"
#include "parallel/control_device.h"
#include "parallel/fsdp/fsdp_unit.h"
#include "parallel/fsdp/unit_registry.h"
#include "tensor/factory.h"

namespace braid::parallel::fsdp {

namespace {

// The sharded unit managing `param` and the parameter's spec there, or {null, null}.
std::pair<std::shared_ptr<FSDPUnit>, const ParamShardSpec*> sharding_of(const Tensor& param) {
  auto unit = unit_of_parameter(param);
  if (unit == nullptr || !unit->is_sharded()) return {nullptr, nullptr};
  const auto& params = unit->managed_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].second.is_same(param)) return {unit, &unit->layout().param(i)};
  }
  return {nullptr, nullptr};
}

// Every rank's rows of a shard-shaped state tensor, as the full tensor (collective over the unit's group).
Tensor gather_rows(const FSDPUnit& unit, const ParamShardSpec& spec, const Tensor& shard) {
  // Communicated where the group takes tensors (the unit's GPU on NCCL, even for offloaded shards),
  // returned where the shard lives.
  const Device comm = control_device(*unit.group(), unit.device());
  Shape padded_shape = spec.full_shape;
  padded_shape[0] = spec.rows_per_rank;
  Tensor padded = zeros(padded_shape, TensorOptions(shard.dtype(), comm));
  if (shard.size(0) > 0) padded.narrow(0, 0, shard.size(0)).copy_(shard);
  Shape gathered_shape = spec.full_shape;
  gathered_shape[0] = spec.rows_per_rank * unit.group()->size();
  Tensor gathered = empty(gathered_shape, TensorOptions(shard.dtype(), comm));
  Tensor in = padded.view({-1});
  Tensor out = gathered.view({-1});
  unit.group()->allgather_into_tensor(out, in)->wait();
  return gathered.narrow(0, 0, spec.rows).clone().to(shard.device());
}

}  // namespace

nn::optim::OptimizerStateDict full_optim_state_dict(const nn::optim::Optimizer& optimizer, bool rank0_only) {
  nn::optim::OptimizerStateDict dict = optimizer.state_dict();
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < optimizer.num_params(); ++i) {
    auto [unit, spec] = sharding_of(optimizer.params()[i]);
    if (unit == nullptr) continue;
    auto it = dict.state.find(static_cast<int64_t>(i));
    if (it == dict.state.end()) continue;  // never stepped, on every rank alike
    const bool keep = !rank0_only || unit->group()->rank() == 0;
    for (auto& [name, t] : it->second) {
      if (t.dim() == 0 || t.shape() != spec->shard_shape(unit->group()->rank())) continue;
      t = gather_rows(*unit, *spec, t);
    }
    if (!keep) dict.state.erase(it);
  }
  return dict;
}

void load_full_optim_state_dict(nn::optim::Optimizer& optimizer, const nn::optim::OptimizerStateDict& full) {
  nn::optim::OptimizerStateDict mine = full;
  for (auto& [index, state] : mine.state) {
    BRAID_CHECK_ARG(index >= 0 && static_cast<size_t>(index) < optimizer.num_params(),
                    "load_full_optim_state_dict: state for parameter {}, but the optimizer has {} parameters", index,
                    optimizer.num_params());
    auto [unit, spec] = sharding_of(optimizer.params()[static_cast<size_t>(index)]);
    if (unit == nullptr) continue;
    const int rank = unit->group()->rank();
    for (auto& [name, t] : state) {
      if (t.dim() == 0 || t.shape() != spec->full_shape) continue;
      t = t.narrow(0, spec->shard_start_row(rank), spec->shard_rows(rank)).clone();
    }
  }
  optimizer.load_state_dict(mine);  // checks shapes against the shards and changes nothing on error
}

}  // namespace braid::parallel::fsdp
