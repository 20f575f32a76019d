#include "nn/activation.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>
#include <utility>

#include "autograd/ops/elementwise.h"
#include "base/check.h"

namespace braid::nn {

Tensor ReLU::forward(const Tensor& input) { return autograd::relu(input); }

GELU::GELU(std::string approximate) : Module("GELU"), approximate_(std::move(approximate)) {
  BRAID_CHECK_ARG(approximate_ == "none" || approximate_ == "tanh",
                  "GELU: approximate argument must be either none or tanh, got '{}'", approximate_);
}

Tensor GELU::forward(const Tensor& input) {
  if (approximate_ == "none") return autograd::gelu(input);
  // Composed from differentiable ops, so its gradient comes for free.
  const double k = std::sqrt(2.0 / std::numbers::pi);
  const Tensor cubic = autograd::mul(autograd::pow(input, 3), 0.044715);
  const Tensor inner = autograd::mul(autograd::add(input, cubic), k);
  const Tensor gate = autograd::add(autograd::tanh(inner), 1.0);
  return autograd::mul(autograd::mul(input, 0.5), gate);
}

std::string GELU::extra_repr() const { return fmt::format("approximate='{}'", approximate_); }

Tensor Sigmoid::forward(const Tensor& input) { return autograd::sigmoid(input); }

Tensor Tanh::forward(const Tensor& input) { return autograd::tanh(input); }

}  // namespace braid::nn
