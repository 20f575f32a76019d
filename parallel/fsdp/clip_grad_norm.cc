#include "parallel/fsdp/clip_grad_norm.h"

#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "base/error.h"
#include "collectives/core/process_group.h"
#include "parallel/control_device.h"
#include "parallel/fsdp/fsdp_unit.h"
#include "parallel/fsdp/unit_registry.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"

namespace braid::parallel::fsdp {

namespace {

// sum |g|^p (or max |g| for p = inf) in float64.
double local_norm_term(const Tensor& g, double norm_type) {
  if (g.numel() == 0) return 0.0;
  const Tensor a = abs(g.to(DType::Float64));
  if (std::isinf(norm_type)) return amax(a).item<double>();
  return sum(pow(a, Scalar(norm_type))).item<double>();
}

}  // namespace

double clip_grad_norm_(nn::Module& module, double max_norm, double norm_type) {
  BRAID_CHECK_ARG(norm_type > 0, "clip_grad_norm_: norm_type must be positive or infinity, got {}", norm_type);
  const bool inf = std::isinf(norm_type);
  auto combine = [inf](double a, double b) { return inf ? std::max(a, b) : a + b; };
  double replicated = 0.0;
  // Per group, in first-appearance order: the sum over this rank's shards, and where the group's
  // allreduce takes its tensor (the parameters' GPU on NCCL).
  struct GroupTerm {
    std::shared_ptr<collectives::ProcessGroup> group;
    double value;
    Device device;
  };
  std::vector<GroupTerm> per_group;
  TensorList grads;
  for (const Tensor& p : module.parameters()) {
    const Tensor g = autograd::grad(p);
    if (!g.defined()) continue;
    grads.push_back(g);
    const double term = local_norm_term(g, norm_type);
    auto unit = unit_of_parameter(p);
    if (unit == nullptr || !unit->is_sharded()) {
      replicated = combine(replicated, term);
      continue;
    }
    auto it = per_group.begin();
    while (it != per_group.end() && it->group != unit->group()) ++it;
    if (it == per_group.end()) {
      per_group.push_back({unit->group(), term, control_device(*unit->group(), unit->device())});
    } else {
      it->value = combine(it->value, term);
    }
  }
  double total = replicated;
  for (const GroupTerm& g : per_group) {
    Tensor t = full({1}, g.value, DType::Float64).to(g.device);
    TensorList list{t};
    collectives::AllreduceOptions o;
    o.reduce_op = inf ? collectives::ReduceOp::MAX : collectives::ReduceOp::SUM;
    g.group->allreduce(list, o)->wait();
    total = combine(total, list[0].cpu().item<double>());
  }
  const double norm = inf ? total : std::pow(total, 1.0 / norm_type);
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    autograd::NoGradGuard no_grad;
    for (const Tensor& g : grads) g.mul_(Scalar(coef));
  }
  return norm;
}

}  // namespace braid::parallel::fsdp
