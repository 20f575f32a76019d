// Elementwise activation modules, as torch.nn.ReLU / GELU / Sigmoid / Tanh. They hold no state.
#pragma once

#include <string>

#include "nn/module.h"

namespace braid::nn {

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& input) override;
};

// approximate "none": x * Phi(x) (exact); "tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& input) override;
  const std::string& approximate() const { return approximate_; }

 protected:
  std::string extra_repr() const override;

 private:
  std::string approximate_;
};

class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& input) override;
};

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& input) override;
};

}  // namespace braid::nn
