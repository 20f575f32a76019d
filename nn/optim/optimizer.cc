#include "nn/optim/optimizer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "tensor/factory.h"

namespace braid::nn::optim {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

}  // namespace

TensorList tensors_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  TensorList out;
  out.reserve(named.size());
  for (const auto& [n, t] : named) out.push_back(t);
  return out;
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  out.reserve(named.size());
  for (const auto& [n, t] : named) out.push_back(n);
  return out;
}

// --- OptimizerStateDict

StateDict OptimizerStateDict::to_flat() const {
  StateDict flat;
  for (const auto& [index, st] : state) {
    for (const auto& [name, t] : st) flat.emplace_back("state." + std::to_string(index) + "." + name, t);
  }
  for (const auto& [name, value] : options) {
    flat.emplace_back("options." + name, scalar_tensor(value, DType::Float64));
  }
  flat.emplace_back("num_params", scalar_tensor(num_params, DType::Int64));
  return flat;
}

OptimizerStateDict OptimizerStateDict::from_flat(const StateDict& flat) {
  OptimizerStateDict dict;
  bool have_count = false;
  for (const auto& [key, t] : flat) {
    BRAID_CHECK_ARG(t.defined(), "OptimizerStateDict::from_flat: entry '{}' is undefined", key);
    if (key == "num_params") {
      BRAID_CHECK_ARG(t.numel() == 1, "OptimizerStateDict::from_flat: 'num_params' must hold one value, got {}",
                      t.describe());
      dict.num_params = t.item<int64_t>();
      have_count = true;
    } else if (starts_with(key, "options.") && key.size() > 8) {
      BRAID_CHECK_ARG(t.numel() == 1, "OptimizerStateDict::from_flat: option '{}' must hold one value, got {}", key,
                      t.describe());
      dict.options[key.substr(8)] = t.item<double>();
    } else if (starts_with(key, "state.")) {
      // state.<index>.<name>
      const size_t dot = key.find('.', 6);
      int64_t index = -1;
      const char* first = key.data() + 6;
      const char* last = key.data() + (dot == std::string::npos ? key.size() : dot);
      const auto [ptr, ec] = std::from_chars(first, last, index);
      BRAID_CHECK_ARG(dot != std::string::npos && dot + 1 < key.size() && ec == std::errc() && ptr == last &&
                          index >= 0,
                      "OptimizerStateDict::from_flat: malformed state key '{}' (expected state.<index>.<name>)", key);
      dict.state[index][key.substr(dot + 1)] = t;
    } else {
      BRAID_THROW(InvalidArgument,
                  "OptimizerStateDict::from_flat: unexpected key '{}' (expected state.<index>.<name>, "
                  "options.<name> or num_params)",
                  key);
    }
  }
  BRAID_CHECK_ARG(have_count, "OptimizerStateDict::from_flat: missing key 'num_params'");
  return dict;
}

// --- Optimizer

Optimizer::Optimizer(std::string name, TensorList params, std::vector<std::string> param_names)
    : name_(std::move(name)), params_(std::move(params)), param_names_(std::move(param_names)) {
  BRAID_CHECK_ARG(!params_.empty(), "{}: optimizer got an empty parameter list", name_);
  param_names_.resize(params_.size());
  state_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    BRAID_CHECK_ARG(p.defined(), "{}: {} is an undefined tensor", name_, describe_param(i));
    BRAID_CHECK_ARG(!p.is_sparse(), "{}: {} is sparse; parameters must be dense", name_, describe_param(i));
    BRAID_CHECK_ARG(is_floating(p.dtype()), "{}: {} has dtype {}; only floating point parameters can be optimized",
                    name_, describe_param(i), dtype_name(p.dtype()));
    BRAID_CHECK_ARG(autograd::is_leaf(p), "{}: can't optimize a non-leaf Tensor ({})", name_, describe_param(i));
    const bool fresh = index_of_.emplace(p.unsafe_impl(), i).second;
    BRAID_CHECK_ARG(fresh, "{}: {} appears more than once in the parameter list", name_, describe_param(i));
  }
}

std::string Optimizer::describe_param(size_t index) const {
  if (index < param_names_.size() && !param_names_[index].empty()) {
    return fmt::format("parameter {} ('{}')", index, param_names_[index]);
  }
  return fmt::format("parameter {}", index);
}

const ParamState& Optimizer::state(size_t index) const {
  BRAID_CHECK_LT(index, state_.size(), "{}: state(): no parameter with this index", name_);
  return state_[index];
}

void Optimizer::update_one(size_t index, const Tensor& grad) {
  const Tensor& p = params_[index];
  BRAID_CHECK_ARG(grad.shape() == p.shape(), "{}: gradient of shape {} for {} of shape {}", name_,
                  shape_str(grad.shape()), describe_param(index), shape_str(p.shape()));
  BRAID_CHECK_ARG(grad.device() == p.device(), "{}: gradient on {} for {} on {}", name_, grad.device(),
                  describe_param(index), p.device());
  update(index, p, grad, state_[index]);
}

void Optimizer::step() {
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = autograd::grad(params_[i]);
    if (g.defined()) update_one(i, g);
  }
}

Tensor Optimizer::step(const std::function<Tensor()>& closure) {
  Tensor loss;
  {
    autograd::EnableGradGuard enable;
    loss = closure();
  }
  step();
  return loss;
}

void Optimizer::step_with(const ParamGrads& param_grads) {
  // Resolve every pair first, so that a bad entry changes no parameter.
  std::vector<std::pair<size_t, const Tensor*>> todo;
  todo.reserve(param_grads.size());
  std::unordered_set<size_t> seen;
  for (size_t k = 0; k < param_grads.size(); ++k) {
    const auto& [p, g] = param_grads[k];
    BRAID_CHECK_ARG(p.defined(), "{}: step_with: entry {} has an undefined parameter", name_, k);
    const auto it = index_of_.find(p.unsafe_impl());
    BRAID_CHECK_ARG(it != index_of_.end(), "{}: step_with: entry {} ({}) is not a parameter of this optimizer", name_,
                    k, p.describe());
    BRAID_CHECK_ARG(seen.insert(it->second).second, "{}: step_with: {} is listed more than once", name_,
                    describe_param(it->second));
    if (!g.defined()) continue;
    BRAID_CHECK_ARG(g.shape() == p.shape(), "{}: step_with: gradient of shape {} for {} of shape {}", name_,
                    shape_str(g.shape()), describe_param(it->second), shape_str(p.shape()));
    todo.emplace_back(it->second, &g);
  }
  // Parameter order, as step() goes, so both forms run the same updates in the same order.
  std::sort(todo.begin(), todo.end());
  autograd::NoGradGuard no_grad;
  for (const auto& [index, g] : todo) update_one(index, *g);
}

void Optimizer::zero_grad(bool set_to_none) {
  for (const auto& p : params_) autograd::zero_grad(p, set_to_none);
}

OptimizerStateDict Optimizer::state_dict() const {
  OptimizerStateDict dict;
  dict.num_params = static_cast<int64_t>(params_.size());
  dict.options = options_map();
  for (size_t i = 0; i < state_.size(); ++i) {
    if (state_[i].empty()) continue;
    auto& out = dict.state[static_cast<int64_t>(i)];
    for (const auto& [name, t] : state_[i]) out[name] = t.clone();
  }
  return dict;
}

void Optimizer::load_state_dict(const OptimizerStateDict& dict) {
  BRAID_CHECK_ARG(dict.num_params == static_cast<int64_t>(params_.size()),
                  "{}: load_state_dict: loaded state dict contains a parameter group that doesn't match the size of "
                  "optimizer's group ({} parameters loaded, {} in the optimizer)",
                  name_, dict.num_params, params_.size());
  const auto names = state_names();
  for (const auto& [index, st] : dict.state) {
    BRAID_CHECK_ARG(index >= 0 && index < static_cast<int64_t>(params_.size()),
                    "{}: load_state_dict: state for parameter index {} but the optimizer has {} parameters", name_,
                    index, params_.size());
    const auto i = static_cast<size_t>(index);
    for (const auto& [name, t] : st) {
      BRAID_CHECK_ARG(std::find(names.begin(), names.end(), name) != names.end(),
                      "{}: load_state_dict: unexpected state '{}' for {} (this optimizer keeps: {})", name_, name,
                      describe_param(i), fmt::join(names, ", "));
      BRAID_CHECK_ARG(t.defined() && !t.is_sparse(), "{}: load_state_dict: state '{}' of {} is undefined or sparse",
                      name_, name, describe_param(i));
      if (name == "step") {
        BRAID_CHECK_ARG(t.numel() == 1, "{}: load_state_dict: state 'step' of {} must hold one value, got {}", name_,
                        describe_param(i), t.describe());
      } else {
        BRAID_CHECK_ARG(t.shape() == params_[i].shape(),
                        "{}: load_state_dict: state '{}' of {} has shape {} but the parameter has shape {}", name_,
                        name, describe_param(i), shape_str(t.shape()), shape_str(params_[i].shape()));
      }
    }
  }
  check_options(dict.options);

  std::vector<ParamState> loaded(params_.size());
  for (const auto& [index, st] : dict.state) {
    const Tensor& p = params_[static_cast<size_t>(index)];
    for (const auto& [name, t] : st) {
      // Own copies: the caller's dict must not alias the live buffers.
      loaded[static_cast<size_t>(index)][name] =
          name == "step" ? t.clone() : t.to(p.dtype()).to(p.device()).clone();
    }
  }
  set_options(dict.options);
  state_ = std::move(loaded);
}

}  // namespace braid::nn::optim
