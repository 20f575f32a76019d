// Autograd state on tensors: requires_grad, .grad, grad_fn, leaves, hooks.
//
// braid::Tensor knows nothing of autograd; these functions attach and read an AutogradMeta through the
// tensor's opaque slot. All copies of a Tensor handle share it; detach() makes a handle without it.
//
// A tensor is a leaf when it has no grad_fn: created by the user (or by detach()). Leaves that require
// grad get their gradient accumulated into .grad (or into the backward pass's GradSink).
#pragma once

#include <functional>
#include <memory>
#include <mutex>

#include "autograd/node.h"

namespace braid::autograd {

// Runs after a leaf's gradient has been accumulated; `grad` is the accumulated value (param's .grad, or
// what the GradSink holds for it).
using PostAccumulateHook = std::function<void(const Tensor& param, const Tensor& grad)>;

struct AutogradMeta final : AutogradMetaBase {
  bool requires_grad = false;
  Tensor grad;                               // GUARDED_BY(mu)
  std::shared_ptr<Node> grad_fn;             // null for leaves
  uint32_t output_nr = 0;                    // which output of grad_fn this tensor is
  std::weak_ptr<Node> grad_accumulator;      // leaves only; created on first use
  std::vector<GradHook> leaf_hooks;          // tensor hooks of a leaf (run before accumulation)
  std::vector<PostAccumulateHook> post_accumulate_hooks;
  std::string name;                          // optional, for error messages
  std::mutex mu;
};

// --- queries (false/undefined for tensors without metadata)
bool requires_grad(const Tensor& t);
bool is_leaf(const Tensor& t);
std::shared_ptr<Node> grad_fn(const Tensor& t);
Tensor grad(const Tensor& t);
AutogradMeta* meta(const Tensor& t);

// --- changes
// Marks a leaf as requiring grad. Throws for a non-leaf ("you can only change requires_grad flags of leaf
// variables") and for integer dtypes ("only Tensors of floating point dtype can require gradients").
const Tensor& set_requires_grad(const Tensor& t, bool on = true);
void set_grad(const Tensor& t, const Tensor& grad);
// Sets .grad to undefined (set_to_none) or zeros it in place.
void zero_grad(const Tensor& t, bool set_to_none = true);
// A tensor sharing storage with `t` but outside the graph (no grad_fn, requires_grad false).
Tensor detach(const Tensor& t);
// Names a tensor for error messages ("fc2.weight").
void set_name(const Tensor& t, std::string name);

// --- hooks
// Called with the gradient of `t` during backward; may return a replacement (or undefined to keep it).
void register_hook(const Tensor& t, GradHook hook);
// Leaves only: called after the gradient has been accumulated (DDP and FSDP reduce from here).
void register_post_accumulate_grad_hook(const Tensor& t, PostAccumulateHook hook);

// --- for op implementations
// The edge a gradient for `t` flows into: its grad_fn (and output_nr), or its leaf accumulator; invalid
// when `t` does not require grad.
Edge gradient_edge(const Tensor& t);
// Whether an op on these inputs must record a node (grad mode on and some input requires grad).
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);
bool any_requires_grad(const std::vector<Tensor>& inputs);
// Returns `out` as output `output_nr` of `node`. When the raw op handed back an existing handle (e.g.
// contiguous() of a contiguous input), a fresh alias is made so the input's own history is untouched.
Tensor set_history(const Tensor& out, const std::shared_ptr<Node>& node, uint32_t output_nr = 0);

}  // namespace braid::autograd
