// nn::optim::Optimizer: the base of SGD, Adam and AdamW (PyTorch 1.13 semantics).
//
// An optimizer holds an ordered list of parameters (one parameter group) and per-parameter state tensors
// keyed by the parameter's index in that list ("momentum_buffer", "exp_avg", "step", ...), named as
// PyTorch names them so that state dicts read the same.
//
// Two ways to step:
//   step()                  reads each parameter's .grad (autograd::grad) and skips parameters without one;
//   step_with(param_grads)  the functional form: takes (parameter, gradient) pairs instead of .grad, e.g.
//                           the gradients of one distributed-autograd context. Parameters not listed are
//                           left alone; a listed tensor that is not one of the optimizer's parameters is
//                           an error. Both forms update the same state.
// Updates run under NoGradGuard and change each parameter in place (module handles stay valid).
//
// Thread-safety: an optimizer is used from one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "tensor/tensor.h"

namespace braid::nn::optim {

// The named state tensors of one parameter.
using ParamState = std::map<std::string, Tensor>;
// (parameter, gradient) pairs for step_with(); an undefined gradient skips its parameter.
using ParamGrads = std::vector<std::pair<Tensor, Tensor>>;

// What state_dict() returns and load_state_dict() takes: PyTorch's {"state": {i: {...}}, "param_groups":
// [{options..., "params": [0..n-1]}]} for one group.
struct OptimizerStateDict {
  // Parameter index -> its state; parameters that were never stepped have no entry.
  std::map<int64_t, ParamState> state;
  // The options by PyTorch's names ("lr", "momentum", "betas" as "beta1"/"beta2", ...); bools are 0/1.
  std::map<std::string, double> options;
  // How many parameters the group had (PyTorch's "params" list is 0..num_params-1).
  int64_t num_params = 0;

  // A flat form for nn::save_state_dict(): "state.<i>.<name>" tensors, "options.<name>" 0-dim float64
  // tensors and "num_params" (0-dim int64).
  StateDict to_flat() const;
  // The inverse of to_flat(); throws InvalidArgument for an unknown or malformed key.
  static OptimizerStateDict from_flat(const StateDict& flat);
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update from every parameter's .grad.
  void step();
  // Re-evaluates the model: runs `closure` (with grad mode on; it should zero grads, compute the loss
  // and call backward), then steps; returns the closure's loss.
  Tensor step(const std::function<Tensor()>& closure);
  // The functional form: one update from the given gradients instead of .grad.
  void step_with(const ParamGrads& param_grads);

  // Clears every parameter's .grad (set_to_none) or zeroes it in place.
  void zero_grad(bool set_to_none = true);

  // A snapshot: the state tensors are copies, so stepping on does not change a returned dict.
  OptimizerStateDict state_dict() const;
  // Replaces the state and options. Checks everything first and changes nothing on error: the parameter
  // count must match, every index must be in range, state names must be ones this optimizer keeps, and
  // tensor state must have its parameter's shape. Floating state is converted to the parameter's dtype
  // and device (as PyTorch does); "step" keeps its own.
  void load_state_dict(const OptimizerStateDict& dict);

  const std::string& name() const { return name_; }
  const TensorList& params() const { return params_; }
  size_t num_params() const { return params_.size(); }
  // The state of parameter `index` (empty before its first update).
  const ParamState& state(size_t index) const;
  // The learning rate, read and set by schedulers.
  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;

 protected:
  // Parameters must be defined, floating, leaves and distinct; names (may be empty) label errors.
  Optimizer(std::string name, TensorList params, std::vector<std::string> param_names);

  // Updates parameter `index` in place from `grad` (same shape, dense or sparse), under NoGradGuard.
  virtual void update(size_t index, const Tensor& param, const Tensor& grad, ParamState& state) = 0;
  virtual std::map<std::string, double> options_map() const = 0;
  // Applies loaded options; called only after every key was checked by check_options().
  virtual void set_options(const std::map<std::string, double>& options) = 0;
  // Throws InvalidArgument for an option this optimizer does not have or an invalid value.
  virtual void check_options(const std::map<std::string, double>& options) const = 0;
  // The state names this optimizer keeps ("step" and the buffers).
  virtual std::vector<std::string> state_names() const = 0;

  // "parameter 3 ('fc2.weight')" for messages.
  std::string describe_param(size_t index) const;

 private:
  void update_one(size_t index, const Tensor& grad);

  std::string name_;
  TensorList params_;
  std::vector<std::string> param_names_;
  std::vector<ParamState> state_;
  std::unordered_map<const TensorImpl*, size_t> index_of_;
};

// Splits named parameters (Module::named_parameters()) into tensors and names.
TensorList tensors_of(const std::vector<std::pair<std::string, Tensor>>& named);
std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named);

}  // namespace braid::nn::optim
