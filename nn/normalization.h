// nn::LayerNorm, as torch.nn.LayerNorm: normalises over the trailing `normalized_shape` dims.
#pragma once

#include "nn/module.h"

namespace braid::nn {

class LayerNorm : public Module {
 public:
  // With elementwise_affine: weight = ones(normalized_shape), bias = zeros(normalized_shape).
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNorm(int64_t normalized_size, double eps = 1e-5, bool elementwise_affine = true)
      : LayerNorm(Shape{normalized_size}, eps, elementwise_affine) {}

  Tensor forward(const Tensor& input) override;
  void reset_parameters();

  const Shape& normalized_shape() const { return normalized_shape_; }
  double eps() const { return eps_; }
  bool elementwise_affine() const { return elementwise_affine_; }
  // Undefined without elementwise_affine.
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 protected:
  std::string extra_repr() const override;

 private:
  Shape normalized_shape_;
  double eps_;
  bool elementwise_affine_;
  Tensor weight_;
  Tensor bias_;
};

}  // namespace braid::nn
