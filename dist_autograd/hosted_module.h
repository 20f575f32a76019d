// The owner's side of a RemoteModule: the module itself, kept behind the RemoteModule's module_rref as an
// object of the RPC class "dist_autograd.RemoteModule" (registered by remote_classes.h).
//
// Constructor arguments (what RemoteModule sends through rpc::remote): positional (module class name,
// device string, list of the module's positional arguments), keywords = the module's keyword arguments.
// The module is made by the owner's module-class registry (module_registry.h) and moved to the device
// when that is a CUDA device.
//
// Methods:
//   "forward"          positional tensors (None for an undefined tensor) -> a tensor when the module gives
//                      one output, else a tuple of tensors. With a CUDA device, the inputs are moved there
//                      and the outputs back to the CPU (as PyTorch's RemoteModule does without a device
//                      map), both differentiably.
//   "parameter_rrefs"  (recurse=True) -> a list of RRefs owned here, one per parameter, in order
//   "info"             -> {"class", "type", "device", "num_parameters"}
// to_here() on a module_rref from another worker gives the module's state: a dict of dotted name ->
// tensor (parameters, then buffers), detached copies.
//
// Thread-safety: an nn::Module runs one forward at a time, so concurrent "forward" calls (several
// trainers on one remote module) are serialised here.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "nn/module.h"
#include "rpc/registry.h"
#include "rpc/rref.h"
#include "rpc/value.h"

namespace braid::dist_autograd {

inline constexpr const char* kHostedModuleClass = "dist_autograd.RemoteModule";

class HostedModule {
 public:
  HostedModule(std::string class_name, std::shared_ptr<nn::Module> module, Device device);

  rpc::Value forward(const rpc::Args& args);
  rpc::Value parameter_rrefs(bool recurse) const;
  rpc::Value info() const;
  // Dotted name -> detached copy, parameters then buffers.
  rpc::Value state() const;

  const std::string& class_name() const { return class_name_; }
  const std::shared_ptr<nn::Module>& module() const { return module_; }
  const Device& device() const { return device_; }

 private:
  const std::string class_name_;
  const std::shared_ptr<nn::Module> module_;
  const Device device_;
  std::mutex forward_mu_;
};

// Adds the class "dist_autograd.RemoteModule" to `registry` (once per registry; see remote_classes.h).
void register_hosted_module_class(rpc::Registry& registry);

// The module behind a RemoteModule's module_rref, on its owner (PyTorch: module_rref.local_value()).
// InvalidArgument when this worker is not the owner or the RRef holds something else.
std::shared_ptr<nn::Module> local_module(const rpc::RRef& module_rref);

// A module's state as a StateDict from what module_rref.to_here() returns: the state dict sent by the
// owner, or (on the owner itself, where to_here gives the object) the module's own tensors detached.
nn::StateDict state_dict_of(const rpc::Value& module_value);

}  // namespace braid::dist_autograd
