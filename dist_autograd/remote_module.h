// RemoteModule: a module that lives on another worker (or this one), called like a local module, as
// torch.distributed.nn.RemoteModule.
//
//   RemoteModule layer("worker0/cpu", "nn.Linear", {Value(int64_t{10}), Value(int64_t{5}), Value(false)});
//   {
//     dist_autograd::Context ctx;
//     Tensor y = layer(x);                       // runs on worker0; recorded by distributed autograd
//     dist_autograd::backward(ctx.id(), {sum(y)});
//   }
//   std::vector<rpc::RRef> params = layer.remote_parameters();   // for a DistributedOptimizer
//
// Construction creates `module_class(args)` on the worker named by `remote_device` (remote_device.h) through
// rpc::remote, from the owner's module-class registry (module_registry.h), and waits for it (as PyTorch's
// constructor does), so that an unknown class or bad arguments fail here, with the owner's name. With a
// CUDA device the owner moves the module there; inputs are moved to it and outputs back to the CPU.
//
// forward* run the module's forward on the owner through a method call on module_rref(). Nothing here is
// special to autograd: inside a dist_autograd::Context the RPC layer's hooks record the send/recv
// functions for the tensors that cross, so a distributed backward reaches the remote parameters (their
// gradients land in the owner's context, not in .grad).
//
// Errors of the remote forward come back as RemoteError naming the owner (or as the error itself when the
// owner is this worker). Every call waits at most the RPC agent's default timeout.
//
// Thread-safety: a RemoteModule may be used from several threads; the owner serialises forwards.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/future.h"
#include "dist_autograd/remote_device.h"
#include "nn/module.h"
#include "rpc/rref.h"
#include "rpc/value.h"

namespace braid::dist_autograd {

class RemoteModule {
 public:
  // `args`: the module's positional and keyword arguments (e.g. nn.Linear's in_features, out_features,
  // bias). Throws InvalidArgument for a bad remote_device string or an unknown worker, and the owner's
  // error (RemoteError naming it) when the module cannot be made there.
  RemoteModule(std::string_view remote_device, const std::string& module_class, const rpc::Args& args = {});

  // A handle on a module that already exists: `module_rref` is the module_rref() of a RemoteModule made
  // elsewhere (e.g. by a job's driver, which hands it to each trainer). Nothing is created or waited for;
  // InvalidArgument for a bad remote_device, an undefined RRef or an RRef owned by another worker than the
  // device names.
  static RemoteModule from_rref(std::string_view remote_device, const std::string& module_class,
                                rpc::RRef module_rref);

  // forward(input) for a module with one input and one output (InvalidArgument naming the count when
  // the module returned several outputs; use forward_many).
  Tensor forward(const Tensor& input) const;
  Tensor operator()(const Tensor& input) const { return forward(input); }
  // Several inputs (an undefined tensor is sent as None) and every output.
  nn::TensorList forward_many(const nn::TensorList& inputs) const;
  Future<Tensor> forward_async(const Tensor& input) const;
  Future<nn::TensorList> forward_many_async(const nn::TensorList& inputs) const;
  // The raw form: positional tensors or None in, the owner's result (a tensor or a tuple of tensors) out.
  Future<rpc::Value> forward_value_async(const rpc::Args& args) const;

  // One RRef per parameter of the remote module (recursing into children), owned by the owner, in the
  // module's parameter order (PyTorch: remote_parameters(recurse=True) -> List[RRef]).
  std::vector<rpc::RRef> remote_parameters(bool recurse = true) const;

  // The RRef of the module on its owner: local_module(rref) there, to_here() (its state dict) elsewhere.
  const rpc::RRef& module_rref() const { return module_rref_; }
  const RemoteDevice& remote_device() const { return remote_device_; }
  const rpc::WorkerInfo& owner() const { return owner_; }
  const Device& device() const { return remote_device_.device(); }
  const std::string& module_class() const { return module_class_; }

 private:
  RemoteModule(RemoteDevice device, std::string module_class, rpc::RRef module_rref);
  // "RemoteModule('worker0/cpu', nn.Linear)" for messages.
  std::string describe() const;

  RemoteDevice remote_device_;
  rpc::WorkerInfo owner_;
  std::string module_class_;
  rpc::RRef module_rref_;
};

}  // namespace braid::dist_autograd
