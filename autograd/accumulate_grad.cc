#include "autograd/accumulate_grad.h"

#include <limits>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "tensor/sparse.h"

namespace braid::autograd {

// The highest priority: the engine runs an accumulator as soon as its gradient is complete (PyTorch does
// the same), so post-accumulate hooks fire early even when the accumulator is older than the graph.
AccumulateGrad::AccumulateGrad(Tensor leaf)
    : Node({}, std::numeric_limits<uint64_t>::max()), leaf_(std::move(leaf)) {}

TensorList AccumulateGrad::apply(TensorList&& grads) {
  // Moved, not copied: the engine hands over its only reference, which lets .grad take the tensor below.
  Tensor g = grads.empty() ? Tensor() : std::move(grads[0]);
  if (!g.defined()) return {};
  AutogradMeta* m = meta(leaf_);
  BRAID_ASSERT(m != nullptr, "AccumulateGrad for a tensor without autograd metadata");
  std::vector<GradHook> hooks;
  std::vector<PostAccumulateHook> post;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    hooks = m->leaf_hooks;
    post = m->post_accumulate_hooks;
  }
  GradSink* const sink = current_grad_sink();
  if (sink == nullptr || sink->runs_tensor_hooks()) {
    for (auto& hook : hooks) {
      Tensor replaced = hook(g);
      if (replaced.defined()) g = replaced;
    }
  }
  BRAID_CHECK_ARG(g.shape() == leaf_.shape(), "AccumulateGrad: gradient of shape {} for a leaf of shape {}",
                  shape_str(g.shape()), shape_str(leaf_.shape()));
  // A leaf's gradient has the leaf's dtype (PyTorch casts it too): an op that promoted (float32 leaf plus a
  // float64 tensor) hands back a float64 gradient, which a sink or grad() would otherwise keep.
  if (!g.is_sparse() && g.dtype() != leaf_.dtype()) g = g.to(leaf_.dtype());
  std::lock_guard<std::mutex> accumulating(accumulate_mu_);
  Tensor total;
  if (sink != nullptr) {
    total = sink->accumulate(leaf_, g);
  } else {
    std::lock_guard<std::mutex> lock(m->mu);
    if (g.is_sparse()) {
      // Sparse gradients are immutable values: accumulate by replacing .grad.
      m->grad = m->grad.defined() ? add_maybe_sparse(m->grad, g) : g;
    } else if (!m->grad.defined()) {
      // .grad must own its buffer, since later passes add into it in place. A gradient that nothing else
      // references (the usual case: a fresh result of the producing node's rule) is taken as it is, as
      // PyTorch does: copying it was a full extra pass over every weight on every step. One shared with
      // another leaf, a hook, a saved tensor, the caller's grad_tensors or a view is copied.
      if (g.use_count() == 1 && g.storage().use_count() == 1 && g.autograd_meta() == nullptr &&
          g.is_contiguous() && g.storage()->nbytes() == g.nbytes()) {
        m->grad = std::move(g);
      } else {
        m->grad = g.clone();
      }
    } else if (m->grad.is_sparse()) {
      m->grad = add_maybe_sparse(m->grad, g);
    } else {
      m->grad.add_(g);  // in place: a .grad that is a view into a DDP bucket stays one
    }
    total = m->grad;
  }
  // A sink that accumulated nothing (grad() only captures) returns undefined: no hook fires then.
  if (total.defined()) {
    for (auto& hook : post) hook(leaf_, total);
  }
  return {};
}

}  // namespace braid::autograd
