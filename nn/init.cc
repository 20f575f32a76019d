#include "nn/init.h"

#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "base/check.h"
#include "tensor/factory.h"

namespace braid::nn::init {
namespace {

void check_floating(const Tensor& t, const char* op) {
  BRAID_CHECK_ARG(t.defined(), "nn.init.{}: tensor is undefined", op);
  BRAID_CHECK_ARG(is_floating(t.dtype()), "nn.init.{}: expected a floating-point tensor, got {}", op, t.describe());
}

// Draws in double on the host and converts once, so every dtype and device sees the same stream: a
// float16 weight is the rounding of the float32 weight drawn from the same seed.
const Tensor& fill_from(const Tensor& t, std::vector<double>& values) {
  autograd::NoGradGuard no_grad;
  t.copy_(from_vector(values, t.shape()));  // copy_ bumps the version
  return t;
}

}  // namespace

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  BRAID_CHECK_ARG(t.dim() >= 2, "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
                  "(got {})", t.describe());
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Sigmoid:
      return 1.0;
    case Nonlinearity::Tanh:
      return 5.0 / 3.0;
    case Nonlinearity::ReLU:
      return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU:
      return std::sqrt(2.0 / (1.0 + param * param));
  }
  BRAID_THROW(InvalidArgument, "calculate_gain: unknown nonlinearity {}", static_cast<int>(nonlinearity));
}

const Tensor& uniform_(const Tensor& t, double a, double b, Generator* gen) {
  check_floating(t, "uniform_");
  BRAID_CHECK_ARG(a <= b, "nn.init.uniform_: expects a <= b, but found a={} and b={}", a, b);
  std::vector<double> v(static_cast<size_t>(t.numel()));
  (gen ? *gen : default_generator()).fill_uniform(v.data(), static_cast<int64_t>(v.size()));
  for (double& x : v) x = a + (b - a) * x;
  return fill_from(t, v);
}

const Tensor& normal_(const Tensor& t, double mean, double std, Generator* gen) {
  check_floating(t, "normal_");
  BRAID_CHECK_ARG(std >= 0.0, "nn.init.normal_: expects std >= 0.0, but found std {}", std);
  std::vector<double> v(static_cast<size_t>(t.numel()));
  (gen ? *gen : default_generator()).fill_normal(v.data(), static_cast<int64_t>(v.size()));
  for (double& x : v) x = mean + std * x;
  return fill_from(t, v);
}

const Tensor& constant_(const Tensor& t, double value) {
  BRAID_CHECK_ARG(t.defined(), "nn.init.constant_: tensor is undefined");
  autograd::NoGradGuard no_grad;
  t.fill_(value);
  return t;
}

const Tensor& zeros_(const Tensor& t) { return constant_(t, 0.0); }

const Tensor& ones_(const Tensor& t) { return constant_(t, 1.0); }

const Tensor& kaiming_uniform_(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity, Generator* gen) {
  check_floating(t, "kaiming_uniform_");
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const int64_t fan = mode == FanMode::FanIn ? fan_in : fan_out;
  if (fan == 0) return t;  // PyTorch warns and leaves a zero-element tensor alone
  const double bound = std::sqrt(3.0) * calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan));
  return uniform_(t, -bound, bound, gen);
}

}  // namespace braid::nn::init
