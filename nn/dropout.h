// nn::Dropout, as torch.nn.Dropout: in training mode zeroes each element with probability p and scales
// the survivors by 1 / (1 - p); in eval mode it is the identity.
#pragma once

#include "nn/module.h"
#include "tensor/random.h"

namespace braid::nn {

class Dropout : public Module {
 public:
  // Masks are drawn from `gen` (which must outlive the module) or, when null, the default generator.
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);

  Tensor forward(const Tensor& input) override;
  double p() const { return p_; }

 protected:
  std::string extra_repr() const override;

 private:
  double p_;
  Generator* gen_;
};

}  // namespace braid::nn
