#include "nn/linear.h"

#include <fmt/format.h>

#include <cmath>

#include "autograd/ops/linalg.h"
#include "nn/init.h"
#include "nn/repr.h"

namespace braid::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Generator* gen)
    : Module("Linear"), in_features_(in_features), out_features_(out_features) {
  BRAID_CHECK_ARG(in_features >= 0 && out_features >= 0,
                  "Linear: in_features and out_features must be non-negative, got {} and {}", in_features,
                  out_features);
  weight_ = register_parameter("weight", Tensor::empty({out_features, in_features}));
  if (bias) bias_ = register_parameter("bias", Tensor::empty({out_features}));
  reset_parameters(gen);
}

void Linear::reset_parameters(Generator* gen) {
  init::kaiming_uniform_(weight_, std::sqrt(5.0), init::FanMode::FanIn, init::Nonlinearity::LeakyReLU, gen);
  if (bias_.defined()) {
    const int64_t fan_in = in_features_;
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias_, -bound, bound, gen);
  }
}

Tensor Linear::forward(const Tensor& input) { return autograd::linear(input, weight_, bias_); }

std::string Linear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", in_features_, out_features_,
                     detail::py_bool(bias_.defined()));
}

}  // namespace braid::nn
