#include "nn/normalization.h"

#include <fmt/format.h>

#include <utility>

#include "autograd/ops/nn_ops.h"
#include "base/check.h"
#include "nn/init.h"
#include "nn/repr.h"

namespace braid::nn {

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine)
    : Module("LayerNorm"),
      normalized_shape_(std::move(normalized_shape)),
      eps_(eps),
      elementwise_affine_(elementwise_affine) {
  BRAID_CHECK_ARG(!normalized_shape_.empty(), "LayerNorm: normalized_shape must have at least one dim");
  for (int64_t s : normalized_shape_) {
    BRAID_CHECK_ARG(s >= 0, "LayerNorm: normalized_shape {} has a negative size", shape_str(normalized_shape_));
  }
  if (elementwise_affine_) {
    weight_ = register_parameter("weight", Tensor::empty(normalized_shape_));
    bias_ = register_parameter("bias", Tensor::empty(normalized_shape_));
  }
  reset_parameters();
}

void LayerNorm::reset_parameters() {
  if (!elementwise_affine_) return;
  init::ones_(weight_);
  init::zeros_(bias_);
}

Tensor LayerNorm::forward(const Tensor& input) {
  return autograd::layer_norm(input, normalized_shape_, weight_, bias_, eps_);
}

std::string LayerNorm::extra_repr() const {
  // Python prints the shape as a tuple: "(4,)" or "(2, 3)".
  const std::string shape = normalized_shape_.size() == 1 ? fmt::format("({},)", normalized_shape_[0])
                                                          : fmt::format("({})", fmt::join(normalized_shape_, ", "));
  return fmt::format("{}, eps={}, elementwise_affine={}", shape, detail::py_float(eps_),
                     detail::py_bool(elementwise_affine_));
}

}  // namespace braid::nn
