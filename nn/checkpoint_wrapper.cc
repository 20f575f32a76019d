#include "nn/checkpoint_wrapper.h"

#include "base/check.h"

namespace braid::nn {

CheckpointWrapper::CheckpointWrapper(std::shared_ptr<Module> module, autograd::CheckpointOptions options)
    : Module("CheckpointWrapper"), options_(std::move(options)) {
  BRAID_CHECK_ARG(module != nullptr, "CheckpointWrapper: the module to wrap is null");
  module_ = register_module(kChildName, std::move(module));
}

Tensor CheckpointWrapper::forward(const Tensor& input) {
  TensorList out = forward_many({input});
  BRAID_CHECK_ARG(out.size() == 1, "CheckpointWrapper({}): called with one tensor but the module returned {} outputs",
                  module_->type_name(), out.size());
  return out[0];
}

TensorList CheckpointWrapper::forward_many(const TensorList& inputs) {
  // The parameters are read at every call: FSDP points their handles at shards or full tensors, and the
  // handles (not their data) are what the recomputation must differentiate.
  std::shared_ptr<Module> module = module_;
  return autograd::checkpoint([module](const TensorList& in) { return (*module)(in); }, inputs,
                              module_->parameters(), options_);
}

}  // namespace braid::nn
