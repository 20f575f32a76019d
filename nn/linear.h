// nn::Linear: y = x W^T + b, as torch.nn.Linear.
#pragma once

#include <cstdint>

#include "nn/module.h"
#include "tensor/random.h"

namespace braid::nn {

class Linear : public Module {
 public:
  // weight [out, in] ~ kaiming_uniform(a = sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)); bias [out] from the
  // same bound. Draws from `gen` (or the default generator): weight first, then bias.
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator* gen = nullptr);

  Tensor forward(const Tensor& input) override;
  // Re-draws weight and bias as the constructor does.
  void reset_parameters(Generator* gen = nullptr);

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  const Tensor& weight() const { return weight_; }
  // Undefined when constructed with bias = false.
  const Tensor& bias() const { return bias_; }

 protected:
  std::string extra_repr() const override;

 private:
  int64_t in_features_;
  int64_t out_features_;
  Tensor weight_;
  Tensor bias_;
};

}  // namespace braid::nn
