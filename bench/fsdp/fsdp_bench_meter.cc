#include "bench/fsdp/fsdp_bench_meter.h"

#include <algorithm>
#include <unordered_set>

#include "autograd/variable.h"
#include "parallel/fsdp/fsdp_unit.h"
#include "parallel/fsdp/unit_registry.h"

namespace braid::bench {
namespace {

namespace fsdp = parallel::fsdp;

int64_t bytes(const Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }

// What a unit holds besides its parameter handles: the shards kept aside while gathered, or the
// gathered storage an issued all-gather is filling.
int64_t unit_extra_bytes(const fsdp::FSDPUnit& unit) {
  if (!unit.is_sharded() || unit.managed_parameters().empty()) return 0;
  const int64_t elem = static_cast<int64_t>(element_size(unit.managed_parameters().front().second.dtype()));
  const int rank = unit.group()->rank();
  if (unit.is_unsharded()) {
    int64_t shards = 0;
    for (size_t i = 0; i < unit.managed_parameters().size(); ++i) {
      shards += unit.layout().param(i).shard_rows(rank) * unit.layout().param(i).row_numel * elem;
    }
    return shards;
  }
  return unit.is_unshard_pending() ? unit.layout().unsharded_numel() * elem : 0;
}

}  // namespace

StateMeter::StateMeter(nn::Module& model) : model_(model) {
  for (auto& [path, m] : model.named_modules()) {
    auto unit = fsdp::unit_of_module(*m);
    if (unit == nullptr || unit->managed_parameters().empty()) continue;
    // Registered after fully_shard's hooks, so these run after FSDP's own: the unit is gathered, and its
    // parameters carry this forward's reduction node.
    m->add_forward_pre_hook([this](nn::Module& module, nn::TensorList&) {
      sample(0);
      watch_reduction_node(module);
    });
    m->add_forward_hook([this](nn::Module&, const nn::TensorList&, nn::TensorList& outputs) {
      for (const Tensor& out : outputs) {
        if (!out.defined() || !autograd::requires_grad(out)) continue;
        autograd::register_hook(out, [this](const Tensor&) {
          sample(0);
          return Tensor();
        });
        break;  // one sample per backward of the unit
      }
    });
  }
}

void StateMeter::watch_reduction_node(nn::Module& unit_module) {
  auto unit = fsdp::unit_of_module(unit_module);
  std::shared_ptr<autograd::Node> node;
  for (const auto& [name, p] : unit->managed_parameters()) {
    if ((node = autograd::grad_fn(p)) != nullptr) break;
  }
  if (node == nullptr) return;  // no grad: no backward to watch
  // Pre-hooks run one after the other once every gradient has arrived: the last one's sample holds them
  // all, next to whatever the unit still has gathered.
  for (uint32_t i = 0; i < node->num_inputs(); ++i) {
    node->add_pre_hook(i, [this](const Tensor& grad) {
      in_node_ += bytes(grad);
      sample(in_node_);
      return Tensor();
    });
  }
  // After the node's work its full gradients are still held (by the engine, until the node returns)
  // next to the shard gradients it made: the reduce-scatter's input and output at once.
  node->add_post_hook([this](const autograd::TensorList& shard_grads) {
    int64_t out = 0;
    for (const Tensor& g : shard_grads) out += bytes(g);
    sample(in_node_ + out);
    in_node_ = 0;
  });
}

void StateMeter::after_step(const nn::optim::Optimizer& optimizer) {
  optimizer_bytes_ = 0;
  // The live state, not state_dict()'s copies: copying would itself make the allocator's peak.
  for (size_t i = 0; i < optimizer.num_params(); ++i) {
    for (const auto& [name, t] : optimizer.state(i)) optimizer_bytes_ += bytes(t);
  }
  step_bytes_ = sample(0);
}

int64_t StateMeter::sample(int64_t in_flight) {
  int64_t total = in_flight + optimizer_bytes_;
  std::unordered_set<const TensorImpl*> seen;
  for (const Tensor& p : model_.parameters()) {
    if (!seen.insert(p.unsafe_impl()).second) continue;
    total += bytes(p) + bytes(autograd::grad(p));
  }
  for (auto& [path, m] : model_.named_modules()) {
    if (auto unit = fsdp::unit_of_module(*m)) total += unit_extra_bytes(*unit);
  }
  peak_ = std::max(peak_, total);
  return total;
}

}  // namespace braid::bench
