#include "nn/module.h"

#include <fmt/format.h>

#include <set>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "base/check.h"

namespace braid::nn {

Tensor Module::forward(const Tensor&) {
  BRAID_THROW(InvalidArgument, "{}: forward(Tensor) is not implemented; this module takes several inputs "
              "(call it with a TensorList)", type_name_);
}

TensorList Module::forward_many(const TensorList& inputs) {
  BRAID_CHECK_ARG(inputs.size() == 1, "{}: forward expects 1 input, got {}", type_name_, inputs.size());
  return {forward(inputs[0])};
}

TensorList Module::operator()(const TensorList& inputs_in) {
  TensorList inputs = inputs_in;
  // Copy the hook maps: a hook may remove itself.
  auto pre = pre_hooks_;
  for (auto& [id, hook] : pre) hook(*this, inputs);
  TensorList outputs = forward_many(inputs);
  auto post = post_hooks_;
  for (auto& [id, hook] : post) hook(*this, inputs, outputs);
  return outputs;
}

Tensor Module::operator()(const Tensor& input) {
  TensorList out = (*this)(TensorList{input});
  BRAID_CHECK_ARG(out.size() == 1, "{}: called with one tensor but forward returned {} outputs", type_name_,
                  out.size());
  return out[0];
}

int Module::add_forward_pre_hook(PreHook hook) {
  pre_hooks_[next_hook_] = std::move(hook);
  return next_hook_++;
}

int Module::add_forward_hook(PostHook hook) {
  post_hooks_[next_hook_] = std::move(hook);
  return next_hook_++;
}

void Module::remove_hook(int handle) {
  pre_hooks_.erase(handle);
  post_hooks_.erase(handle);
}

void Module::check_new_name(const std::string& name) const {
  BRAID_CHECK_ARG(!name.empty() && name.find('.') == std::string::npos,
                  "{}: invalid attribute name '{}' (must be non-empty and contain no '.')", type_name_, name);
  auto taken = [&](const auto& list) {
    for (const auto& [n, v] : list) {
      if (n == name) return true;
    }
    return false;
  };
  BRAID_CHECK_ARG(!taken(parameters_) && !taken(buffers_) && !taken(children_),
                  "{}: attribute '{}' already exists", type_name_, name);
}

Tensor Module::register_parameter(std::string name, Tensor value, bool requires_grad) {
  check_new_name(name);
  BRAID_CHECK_ARG(value.defined(), "{}: parameter '{}' is undefined", type_name_, name);
  if (requires_grad) autograd::set_requires_grad(value, true);
  parameters_.emplace_back(std::move(name), value);
  return value;
}

Tensor Module::register_buffer(std::string name, Tensor value) {
  check_new_name(name);
  buffers_.emplace_back(std::move(name), value);
  return value;
}

void Module::add_child(std::string name, std::shared_ptr<Module> module) {
  check_new_name(name);
  BRAID_CHECK_ARG(module != nullptr, "{}: child module '{}' is null", type_name_, name);
  children_.emplace_back(std::move(name), std::move(module));
}

void Module::collect(const std::string& prefix, bool params, bool recurse,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [n, t] : params ? parameters_ : buffers_) out.emplace_back(prefix + n, t);
  if (!recurse) return;
  for (const auto& [n, c] : children_) c->collect(prefix + n + ".", params, true, out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", true, recurse, out);
  // A parameter shared by two modules (tied weights) is listed once, under its first name.
  std::set<const TensorImpl*> seen;
  std::vector<std::pair<std::string, Tensor>> unique;
  for (auto& [n, t] : out) {
    if (seen.insert(t.unsafe_impl()).second) unique.emplace_back(n, t);
  }
  return unique;
}

TensorList Module::parameters(bool recurse) const {
  TensorList out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", false, recurse, out);
  return out;
}

TensorList Module::buffers(bool recurse) const {
  TensorList out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (auto& [n, c] : children_) {
    for (auto& [sub, m] : c->named_modules()) out.emplace_back(sub.empty() ? n : n + "." + sub, m);
  }
  return out;
}

Tensor Module::parameter(const std::string& dotted) const {
  for (auto& [n, t] : named_parameters()) {
    if (n == dotted) return t;
  }
  for (auto& [n, t] : named_buffers()) {
    if (n == dotted) return t;
  }
  BRAID_THROW(InvalidArgument, "{}: no parameter or buffer named '{}'", type_name_, dotted);
}

std::shared_ptr<Module> Module::child(const std::string& name) const {
  for (auto& [n, c] : children_) {
    if (n == name) return c;
  }
  BRAID_THROW(InvalidArgument, "{}: no child module named '{}'", type_name_, name);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zero_grad(bool set_to_none) {
  for (auto& t : parameters()) autograd::zero_grad(t, set_to_none);
}

void Module::to(DType dtype) {
  autograd::NoGradGuard no_grad;
  for (auto& [n, t] : named_parameters()) {
    if (is_floating(t.dtype())) t.set_data(t.to(dtype));
  }
  for (auto& [n, t] : named_buffers()) {
    if (is_floating(t.dtype())) t.set_data(t.to(dtype));
  }
}

void Module::to(Device device) {
  autograd::NoGradGuard no_grad;
  for (auto& [n, t] : named_parameters()) t.set_data(t.to(device));
  for (auto& [n, t] : named_buffers()) t.set_data(t.to(device));
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [n, c] : children_) c->apply(fn);
  fn(*this);
}

StateDict Module::state_dict() const {
  // PyTorch's order: each module's parameters, then its buffers, then its children's, depth first.
  StateDict out;
  std::function<void(const Module&, const std::string&)> visit = [&](const Module& m, const std::string& prefix) {
    m.collect(prefix, true, false, out);
    m.collect(prefix, false, false, out);
    for (const auto& [n, c] : m.children_) visit(*c, prefix + n + ".");
  };
  visit(*this, "");
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  const StateDict mine = state_dict();
  std::map<std::string, Tensor> incoming(state.begin(), state.end());
  std::vector<std::string> missing, unexpected;
  std::set<std::string> known;
  for (auto& [n, t] : mine) {
    known.insert(n);
    if (!incoming.count(n)) missing.push_back(n);
  }
  for (auto& [n, t] : state) {
    if (!known.count(n)) unexpected.push_back(n);
  }
  if (strict && (!missing.empty() || !unexpected.empty())) {
    std::string msg = fmt::format("Error(s) in loading state_dict for {}:", type_name_);
    if (!missing.empty()) msg += fmt::format(" Missing key(s) in state_dict: \"{}\".", fmt::join(missing, "\", \""));
    if (!unexpected.empty()) {
      msg += fmt::format(" Unexpected key(s) in state_dict: \"{}\".", fmt::join(unexpected, "\", \""));
    }
    BRAID_THROW(InvalidArgument, "{}", msg);
  }
  // Check every shape before copying anything, so a bad dict changes nothing.
  for (auto& [n, t] : mine) {
    auto it = incoming.find(n);
    if (it == incoming.end()) continue;
    BRAID_CHECK_ARG(it->second.shape() == t.shape(),
                    "Error(s) in loading state_dict for {}: size mismatch for {}: copying a param with shape {} "
                    "from checkpoint, the shape in current model is {}.",
                    type_name_, n, shape_str(it->second.shape()), shape_str(t.shape()));
  }
  autograd::NoGradGuard no_grad;
  for (auto& [n, t] : mine) {
    auto it = incoming.find(n);
    if (it != incoming.end()) t.copy_(it->second);
  }
}

void Module::describe(std::string& out, const std::string& name, int indent) const {
  const std::string pad(static_cast<size_t>(indent), ' ');
  out += pad + (name.empty() ? "" : "(" + name + "): ") + type_name_ + "(" + extra_repr();
  if (children_.empty()) {
    out += ")\n";
    return;
  }
  out += "\n";
  for (auto& [n, c] : children_) c->describe(out, n, indent + 2);
  out += pad + ")\n";
}

std::string Module::to_string() const {
  std::string out;
  describe(out, "", 0);
  return out;
}

}  // namespace braid::nn
