#include "autograd/variable.h"

#include "autograd/accumulate_grad.h"
#include "autograd/grad_mode.h"
#include "base/check.h"

namespace braid::autograd {
namespace {

AutogradMeta& materialize(const Tensor& t) {
  BRAID_CHECK_ARG(t.defined(), "autograd: operation on an undefined tensor");
  if (auto* m = meta(t)) return *m;
  auto m = std::make_shared<AutogradMeta>();
  AutogradMeta& ref = *m;
  t.set_autograd_meta(std::move(m));
  return ref;
}

std::shared_ptr<Node> grad_accumulator(const Tensor& t) {
  AutogradMeta& m = materialize(t);
  std::lock_guard<std::mutex> lock(m.mu);
  if (auto acc = m.grad_accumulator.lock()) return acc;
  auto acc = std::make_shared<AccumulateGrad>(t);
  m.grad_accumulator = acc;
  return acc;
}

}  // namespace

AutogradMeta* meta(const Tensor& t) {
  return t.defined() ? static_cast<AutogradMeta*>(t.autograd_meta()) : nullptr;
}

bool requires_grad(const Tensor& t) {
  const auto* m = meta(t);
  return m != nullptr && (m->requires_grad || m->grad_fn != nullptr);
}

bool is_leaf(const Tensor& t) {
  const auto* m = meta(t);
  return m == nullptr || m->grad_fn == nullptr;
}

std::shared_ptr<Node> grad_fn(const Tensor& t) {
  const auto* m = meta(t);
  return m ? m->grad_fn : nullptr;
}

Tensor grad(const Tensor& t) {
  auto* m = meta(t);
  if (m == nullptr) return Tensor();
  std::lock_guard<std::mutex> lock(m->mu);
  return m->grad;
}

const Tensor& set_requires_grad(const Tensor& t, bool on) {
  BRAID_CHECK_ARG(is_leaf(t),
                  "set_requires_grad: you can only change requires_grad flags of leaf variables (tensor {} has "
                  "grad_fn {})", t.describe(), grad_fn(t)->name());
  BRAID_CHECK_ARG(!on || is_floating(t.dtype()),
                  "set_requires_grad: only Tensors of floating point dtype can require gradients (got {})",
                  t.describe());
  materialize(t).requires_grad = on;
  return t;
}

void set_grad(const Tensor& t, const Tensor& g) {
  if (g.defined()) {
    BRAID_CHECK_ARG(g.shape() == t.shape() && g.dtype() == t.dtype() && g.device() == t.device(),
                    "set_grad: assigned grad {} does not match tensor {}", g.describe(), t.describe());
  }
  AutogradMeta& m = materialize(t);
  std::lock_guard<std::mutex> lock(m.mu);
  m.grad = g;
}

void zero_grad(const Tensor& t, bool set_to_none) {
  auto* m = meta(t);
  if (m == nullptr) return;
  std::lock_guard<std::mutex> lock(m->mu);
  if (set_to_none || !m->grad.defined()) m->grad = Tensor();
  else m->grad.zero_();
}

Tensor detach(const Tensor& t) { return t.alias(); }

void set_name(const Tensor& t, std::string name) { materialize(t).name = std::move(name); }

void register_hook(const Tensor& t, GradHook hook) {
  BRAID_CHECK_ARG(requires_grad(t), "register_hook: cannot register a hook on a tensor that doesn't require "
                                    "gradient ({})", t.describe());
  AutogradMeta& m = materialize(t);
  if (m.grad_fn) {
    m.grad_fn->add_pre_hook(m.output_nr, std::move(hook));
  } else {
    std::lock_guard<std::mutex> lock(m.mu);
    m.leaf_hooks.push_back(std::move(hook));
  }
}

void register_post_accumulate_grad_hook(const Tensor& t, PostAccumulateHook hook) {
  BRAID_CHECK_ARG(is_leaf(t) && requires_grad(t),
                  "register_post_accumulate_grad_hook: post accumulate grad hooks can only be registered on leaf "
                  "tensors that require grad ({})", t.describe());
  AutogradMeta& m = materialize(t);
  std::lock_guard<std::mutex> lock(m.mu);
  m.post_accumulate_hooks.push_back(std::move(hook));
}

Edge gradient_edge(const Tensor& t) {
  auto* m = meta(t);
  if (m == nullptr) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (m->requires_grad) return {grad_accumulator(t), 0};
  return {};
}

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs) {
    if (t != nullptr && t->defined() && requires_grad(*t)) return true;
  }
  return false;
}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && requires_grad(t)) return true;
  }
  return false;
}

Tensor set_history(const Tensor& raw_out, const std::shared_ptr<Node>& node, uint32_t output_nr) {
  const Tensor out = meta(raw_out) != nullptr ? raw_out.alias() : raw_out;
  AutogradMeta& m = materialize(out);
  m.grad_fn = node;
  m.output_nr = output_nr;
  m.requires_grad = true;
  if (node->num_inputs() <= output_nr) node->set_num_inputs(output_nr + 1);
  return out;
}

}  // namespace braid::autograd
