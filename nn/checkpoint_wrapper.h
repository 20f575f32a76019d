// nn::CheckpointWrapper (torch's checkpoint_wrapper): runs the wrapped module under activation
// checkpointing (autograd/checkpoint.h). Forward keeps none of the module's activations, only its
// inputs; backward runs the module's forward again, with the default generator (and any generators in
// the options) replayed so that dropout draws the same masks, and back-propagates through it.
//
// The module is called through operator() both times, so its hooks run in the recomputation too: an FSDP
// unit inside the wrapped module gathers its parameters again there. Every parameter of the wrapped
// module is handed to checkpoint() as a param, so its gradient takes the path it had during the forward
// (an FSDP unit around the wrapper receives the full gradients, as without checkpointing).
//
// The child is named "_checkpoint_wrapped_module", as in torch, so parameter names gain that prefix.
#pragma once

#include <memory>

#include "autograd/checkpoint.h"
#include "nn/module.h"

namespace braid::nn {

class CheckpointWrapper : public Module {
 public:
  static constexpr const char* kChildName = "_checkpoint_wrapped_module";

  explicit CheckpointWrapper(std::shared_ptr<Module> module, autograd::CheckpointOptions options = {});

  Tensor forward(const Tensor& input) override;
  TensorList forward_many(const TensorList& inputs) override;

  const std::shared_ptr<Module>& wrapped() const { return module_; }

 private:
  std::shared_ptr<Module> module_;
  autograd::CheckpointOptions options_;
};

}  // namespace braid::nn
