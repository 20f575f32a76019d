#include "parallel/fsdp/full_params.h"

#include "autograd/grad_mode.h"
#include "base/check.h"
#include "base/error.h"
#include "parallel/fsdp/fsdp_unit.h"
#include "parallel/fsdp/unit_registry.h"

namespace braid::parallel::fsdp {

namespace {

// The units of the tree in named_modules() order: the same on every rank, so the all-gathers line up.
std::vector<std::shared_ptr<FSDPUnit>> units_of(nn::Module& module) {
  std::vector<std::shared_ptr<FSDPUnit>> units;
  for (const auto& [path, m] : module.named_modules()) {
    if (auto u = unit_of_module(*m)) units.push_back(std::move(u));
  }
  return units;
}

}  // namespace

SummonFullParams::SummonFullParams(nn::Module& module, bool writeback) : writeback_(writeback) {
  for (auto& unit : units_of(module)) {
    if (unit->is_unsharded() || !unit->is_sharded()) continue;
    unit->unshard();
    unsharded_here_.push_back(unit);
  }
}

SummonFullParams::~SummonFullParams() {
  for (auto& unit : unsharded_here_) {
    if (writeback_) unit->write_back_shards();
    unit->reshard();
  }
}

nn::StateDict full_state_dict(nn::Module& module, bool rank0_only) {
  auto units = units_of(module);
  const int rank = units.empty() ? 0 : units.front()->group()->rank();
  SummonFullParams full(module, /*writeback=*/false);
  nn::StateDict out;
  if (rank0_only && rank != 0) return out;
  autograd::NoGradGuard no_grad;
  for (const auto& [name, t] : module.state_dict()) out.emplace_back(name, t.cpu().clone());
  return out;
}

void load_full_state_dict(nn::Module& module, const nn::StateDict& state, bool strict) {
  SummonFullParams full(module, /*writeback=*/true);
  autograd::NoGradGuard no_grad;
  module.load_state_dict(state, strict);
}

}  // namespace braid::parallel::fsdp
