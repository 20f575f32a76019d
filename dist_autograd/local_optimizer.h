// The owner's side of a DistributedOptimizer: one local optimizer over this worker's parameters, kept
// behind an RRef as an object of the RPC class "dist_autograd.LocalOptimizer" (registered by
// remote_classes.h), as PyTorch's _LocalOptimizer.
//
// Constructor arguments: (options, list of parameter RRefs owned here). The options are a dict made by
// encode_optimizer_options(): {"kind": "SGD" | "Adam" | "AdamW", and the option fields by their names in
// nn/optim (lr, momentum, beta1, ...)}. The parameters are the RRefs' local values, the very tensors the owner's modules hold, so an
// update is seen by the next forward.
//
// Methods:
//   "step"        (context_id) -> how many parameters had a gradient: step_with() this worker's gradients
//                 of that distributed-autograd context, restricted to the optimizer's parameters (those
//                 without a gradient are left alone). An unknown or released context fails with
//                 get_gradients()'s error.
//   "step_in_turn" (context_id, encode_step_turn(turn)) -> the same, applied in its turn among the steps of
//                 every optimizer over the same parameters (step_order.h); an async method: the reply comes
//                 once every participant of the turn's micro-batch has stepped, and no thread waits.
//   "num_params"  -> the number of parameters.
//   "state_dict"  -> the optimizer's state as a dict of tensors (OptimizerStateDict::to_flat()), for
//                 checkpoints of the job that owns the DistributedOptimizer.
//   "load_state_dict" (that dict) -> None: the inverse (Optimizer::load_state_dict's checks).
//
// Thread-safety: steps of every local optimizer of a process are serialised by one lock (PyTorch's
// _LocalOptimizer.global_lock), so concurrent steps from several trainers never interleave updates.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <variant>

#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "rpc/registry.h"
#include "rpc/value.h"

namespace braid::dist_autograd {

inline constexpr const char* kLocalOptimizerClass = "dist_autograd.LocalOptimizer";

// Which optimizer a DistributedOptimizer runs on each owner, with its options.
using OptimizerOptions = std::variant<nn::optim::SGDOptions, nn::optim::AdamOptions, nn::optim::AdamWOptions>;

// "SGD", "Adam" or "AdamW".
std::string optimizer_kind(const OptimizerOptions& options);
rpc::Value encode_optimizer_options(const OptimizerOptions& options);
// The inverse; InvalidArgument for an unknown kind, an unknown field or a field of the wrong type.
OptimizerOptions decode_optimizer_options(const rpc::Value& value);
// The optimizer of that kind over `params` (its constructor checks the options and the parameters).
std::unique_ptr<nn::optim::Optimizer> make_optimizer(const OptimizerOptions& options, nn::TensorList params);

class LocalOptimizer : public std::enable_shared_from_this<LocalOptimizer> {
 public:
  explicit LocalOptimizer(std::unique_ptr<nn::optim::Optimizer> optimizer);

  // Steps with this worker's gradients of `context_id`; returns how many parameters had a gradient.
  size_t step(int64_t context_id);
  const nn::optim::Optimizer& optimizer() const { return *optimizer_; }
  // Under the same lock as step(), so that a state is never read or replaced mid-update.
  nn::StateDict state_dict() const;
  void load_state_dict(const nn::StateDict& flat);

 private:
  std::unique_ptr<nn::optim::Optimizer> optimizer_;
};

// Adds the class "dist_autograd.LocalOptimizer" to `registry` (once per registry; see remote_classes.h).
void register_local_optimizer_class(rpc::Registry& registry);

}  // namespace braid::dist_autograd
