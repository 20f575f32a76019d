// nn::optim::Adam and AdamW, as torch.optim.Adam / AdamW in PyTorch 1.13 (the single-tensor, non-capturable
// path). For each parameter p with gradient g, at step t (counted per parameter, from 1):
//
//   g = maximize ? -g : g
//   Adam:  g = g + weight_decay * p                 (L2 penalty added to the gradient, when non-zero)
//   AdamW: p = p * (1 - lr * weight_decay)          (decoupled weight decay)
//   m = beta1 * m + (1 - beta1) * g                 ("exp_avg", starts at 0)
//   v = beta2 * v + (1 - beta2) * g * g             ("exp_avg_sq", starts at 0)
//   amsgrad: v_max = max(v_max, v), and v_max replaces v below ("max_exp_avg_sq")
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps       (eps outside the square root)
//   p = p - (lr / (1 - beta1^t)) * m / denom
//
// State: "step" (a 0-dim float32 tensor, as PyTorch 1.13 keeps it), "exp_avg", "exp_avg_sq", and
// "max_exp_avg_sq" with amsgrad. Sparse gradients are an error.
#pragma once

#include "nn/optim/optimizer.h"

namespace braid::nn::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;    // PyTorch's betas[0]
  double beta2 = 0.999;  // PyTorch's betas[1]
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  bool maximize = false;
};

// The same fields; only the weight-decay default differs (PyTorch's AdamW uses 1e-2).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
};

class Adam : public Optimizer {
 public:
  // Throws InvalidArgument for a negative lr, eps or weight_decay and for betas outside [0, 1).
  explicit Adam(TensorList params, AdamOptions options = {});
  Adam(const std::vector<std::pair<std::string, Tensor>>& named_params, AdamOptions options = {});

  const AdamOptions& options() const { return options_; }
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override;

 protected:
  Adam(std::string name, TensorList params, std::vector<std::string> names, AdamOptions options, bool decoupled);

  void update(size_t index, const Tensor& param, const Tensor& grad, ParamState& state) override;
  std::map<std::string, double> options_map() const override;
  void set_options(const std::map<std::string, double>& options) override;
  void check_options(const std::map<std::string, double>& options) const override;
  std::vector<std::string> state_names() const override {
    return {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  }

 private:
  AdamOptions options_;
  bool decoupled_;  // AdamW's weight decay
};

class AdamW final : public Adam {
 public:
  explicit AdamW(TensorList params, AdamWOptions options = {});
  AdamW(const std::vector<std::pair<std::string, Tensor>>& named_params, AdamWOptions options = {});
};

}  // namespace braid::nn::optim
