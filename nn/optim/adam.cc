#include "nn/optim/adam.h"

#include <cmath>

#include "base/check.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"

namespace braid::nn::optim {
namespace {

void validate(const std::string& name, const AdamOptions& o) {
  BRAID_CHECK_ARG(o.lr >= 0.0, "{}: Invalid learning rate: {}", name, o.lr);
  BRAID_CHECK_ARG(o.eps >= 0.0, "{}: Invalid epsilon value: {}", name, o.eps);
  BRAID_CHECK_ARG(o.beta1 >= 0.0 && o.beta1 < 1.0, "{}: Invalid beta parameter at index 0: {}", name, o.beta1);
  BRAID_CHECK_ARG(o.beta2 >= 0.0 && o.beta2 < 1.0, "{}: Invalid beta parameter at index 1: {}", name, o.beta2);
  BRAID_CHECK_ARG(o.weight_decay >= 0.0, "{}: Invalid weight_decay value: {}", name, o.weight_decay);
}

AdamOptions with_entries(const std::string& name, AdamOptions o, const std::map<std::string, double>& entries) {
  for (const auto& [key, v] : entries) {
    if (key == "lr") o.lr = v;
    else if (key == "beta1") o.beta1 = v;
    else if (key == "beta2") o.beta2 = v;
    else if (key == "eps") o.eps = v;
    else if (key == "weight_decay") o.weight_decay = v;
    else if (key == "amsgrad") o.amsgrad = v != 0.0;
    else if (key == "maximize") o.maximize = v != 0.0;
    else BRAID_THROW(InvalidArgument, "{}: load_state_dict: unknown option '{}'", name, key);
  }
  return o;
}

AdamOptions from_adamw(const AdamWOptions& o) {
  return AdamOptions{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad, o.maximize};
}

// The named state tensor, created as zeros shaped like `param` on first use (also when amsgrad is
// switched on after some steps, where PyTorch would fail on the missing key).
Tensor& buffer(ParamState& state, const char* name, const Tensor& param) {
  auto it = state.find(name);
  if (it == state.end()) it = state.emplace(name, zeros_like(param)).first;
  return it->second;
}

}  // namespace

Adam::Adam(TensorList params, AdamOptions options) : Adam("Adam", std::move(params), {}, options, false) {}

Adam::Adam(const std::vector<std::pair<std::string, Tensor>>& named_params, AdamOptions options)
    : Adam("Adam", tensors_of(named_params), names_of(named_params), options, false) {}

Adam::Adam(std::string name, TensorList params, std::vector<std::string> names, AdamOptions options, bool decoupled)
    : Optimizer(std::move(name), std::move(params), std::move(names)), options_(options), decoupled_(decoupled) {
  validate(this->name(), options_);
}

void Adam::set_lr(double lr) {
  AdamOptions o = options_;
  o.lr = lr;
  validate(name(), o);
  options_ = o;
}

std::map<std::string, double> Adam::options_map() const {
  return {{"lr", options_.lr},
          {"beta1", options_.beta1},
          {"beta2", options_.beta2},
          {"eps", options_.eps},
          {"weight_decay", options_.weight_decay},
          {"amsgrad", options_.amsgrad ? 1.0 : 0.0},
          {"maximize", options_.maximize ? 1.0 : 0.0}};
}

void Adam::check_options(const std::map<std::string, double>& options) const {
  validate(name(), with_entries(name(), options_, options));
}

void Adam::set_options(const std::map<std::string, double>& options) {
  options_ = with_entries(name(), options_, options);
}

void Adam::update(size_t index, const Tensor& param, const Tensor& grad, ParamState& state) {
  BRAID_CHECK_ARG(!grad.is_sparse(), "{} does not support sparse gradients, please consider SparseAdam instead ({} "
                  "got a sparse gradient)", name(), describe_param(index));
  const AdamOptions& o = options_;
  Tensor g = o.maximize ? braid::neg(grad) : grad;

  auto step_it = state.find("step");
  if (step_it == state.end()) step_it = state.emplace("step", scalar_tensor(0.0, DType::Float32)).first;
  Tensor& exp_avg = buffer(state, "exp_avg", param);
  Tensor& exp_avg_sq = buffer(state, "exp_avg_sq", param);
  step_it->second.add_(1);
  const double step = step_it->second.item<double>();

  if (decoupled_) {
    if (o.weight_decay != 0.0) param.mul_(1.0 - o.lr * o.weight_decay);
  } else if (o.weight_decay != 0.0) {
    g = braid::add(g, param, o.weight_decay);
  }
  exp_avg.mul_(o.beta1).add_(g, 1.0 - o.beta1);
  exp_avg_sq.mul_(o.beta2).add_(braid::mul(g, g), 1.0 - o.beta2);

  const double bias_correction1 = 1.0 - std::pow(o.beta1, step);
  const double bias_correction2 = 1.0 - std::pow(o.beta2, step);
  const double step_size = o.lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);

  const Tensor* second = &exp_avg_sq;
  if (o.amsgrad) {
    Tensor& max_sq = buffer(state, "max_exp_avg_sq", param);
    braid::binary_out(BinaryOp::Maximum, max_sq, max_sq, exp_avg_sq);
    second = &max_sq;
  }
  // denom = sqrt(v) / sqrt(bc2) + eps, then reused in place for m / denom: one temporary, not three.
  Tensor denom = braid::sqrt(*second);
  braid::binary_(BinaryOp::Div, denom, Scalar(bias_correction2_sqrt));
  denom.add_(Scalar(o.eps));
  braid::binary_out(BinaryOp::Div, denom, exp_avg, denom);
  param.add_(denom, -step_size);
}

AdamW::AdamW(TensorList params, AdamWOptions options)
    : Adam("AdamW", std::move(params), {}, from_adamw(options), true) {}

AdamW::AdamW(const std::vector<std::pair<std::string, Tensor>>& named_params, AdamWOptions options)
    : Adam("AdamW", tensors_of(named_params), names_of(named_params), from_adamw(options), true) {}

}  // namespace braid::nn::optim
