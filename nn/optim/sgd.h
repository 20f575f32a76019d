// nn::optim::SGD: stochastic gradient descent with momentum, dampening, Nesterov and weight decay, as
// torch.optim.SGD in PyTorch 1.13. For each parameter p with gradient g:
//
//   d = maximize ? -g : g
//   d = d + weight_decay * p                              (when weight_decay != 0)
//   if momentum != 0:
//     buf = d                                             (first step: a copy of d)
//     buf = momentum * buf + (1 - dampening) * d          (later steps)
//     d   = nesterov ? d + momentum * buf : buf
//   p = p - lr * d
//
// State: "momentum_buffer" (only with momentum). Sparse gradients (embedding_bag sparse=true) update only
// the rows they hold (coalesced first); they need momentum == 0 and weight_decay == 0, and anything else
// is an error naming the parameter.
#pragma once

#include <limits>

#include "nn/optim/optimizer.h"

namespace braid::nn::optim {

struct SGDOptions {
  // Required, as in PyTorch: the default (NaN) makes the constructor throw.
  double lr = std::numeric_limits<double>::quiet_NaN();
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
};

class SGD final : public Optimizer {
 public:
  // Throws InvalidArgument for a missing or negative lr, negative momentum or weight_decay, and nesterov
  // without momentum or with dampening ("Nesterov momentum requires a momentum and zero dampening").
  SGD(TensorList params, SGDOptions options);
  SGD(const std::vector<std::pair<std::string, Tensor>>& named_params, SGDOptions options);

  const SGDOptions& options() const { return options_; }
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override;

 protected:
  void update(size_t index, const Tensor& param, const Tensor& grad, ParamState& state) override;
  std::map<std::string, double> options_map() const override;
  void set_options(const std::map<std::string, double>& options) override;
  void check_options(const std::map<std::string, double>& options) const override;
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }

 private:
  void update_sparse(size_t index, const Tensor& param, const Tensor& grad);

  SGDOptions options_;
};

// param += alpha * sparse, touching only the rows (index tuples) `sparse` holds; `sparse` is coalesced
// first. Exposed for SparseAdam-like users and tests.
void add_sparse_(const Tensor& param, const Tensor& sparse, double alpha);

}  // namespace braid::nn::optim
