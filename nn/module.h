// nn::Module: the base of every layer and model.
//
// A module owns named parameters (leaf tensors that require grad), named buffers (state that is saved but
// not trained, e.g. running statistics) and named child modules, all kept in registration order. Names are
// stable and dotted ("fc2.weight"), which is what state dicts, DDP's parameter order and FSDP's sharding
// plans key on.
//
// Subclasses register in their constructor and keep the returned handles: a Tensor handle stays valid
// across to(dtype|device) and load_state_dict() because those change the tensor in place (set_data /
// copy_), never replace it.
//
// Forward: single-tensor modules override forward(const Tensor&); modules with several inputs or outputs
// override forward_many(). operator() runs forward pre-hooks, forward, then forward hooks (DDP and FSDP
// attach there).
//
// Thread-safety: a module may be run (forward/backward) from one thread at a time; concurrent reads of its
// structure are safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace braid::nn {

using TensorList = std::vector<Tensor>;
// An ordered list of (dotted name, tensor): parameters first, then buffers, module by module.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // --- forward
  virtual Tensor forward(const Tensor& input);
  virtual TensorList forward_many(const TensorList& inputs);
  Tensor operator()(const Tensor& input);
  TensorList operator()(const TensorList& inputs);

  // --- hooks: a pre-hook may rewrite the inputs; a forward hook may rewrite the outputs.
  using PreHook = std::function<void(Module&, TensorList& inputs)>;
  using PostHook = std::function<void(Module&, const TensorList& inputs, TensorList& outputs)>;
  int add_forward_pre_hook(PreHook hook);
  int add_forward_hook(PostHook hook);
  void remove_hook(int handle);

  // --- structure
  const std::string& type_name() const { return type_name_; }
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  TensorList parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  TensorList buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  // Every module of the tree with its dotted path, this one first (as "").
  std::vector<std::pair<std::string, Module*>> named_modules();
  // The parameter, buffer or child with this (dotted) name; throws naming the name when absent.
  Tensor parameter(const std::string& dotted) const;
  std::shared_ptr<Module> child(const std::string& name) const;

  // --- modes and state
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad(bool set_to_none = true);
  // Converts floating parameters and buffers (integer buffers keep their dtype); autograd state stays.
  void to(DType dtype);
  void to(Device device);
  void apply(const std::function<void(Module&)>& fn);

  StateDict state_dict() const;
  // Copies values in (shapes must match). strict: every key must match both ways, else InvalidArgument
  // listing "Missing key(s) in state_dict: ..." and "Unexpected key(s) in state_dict: ...", and nothing
  // is loaded.
  void load_state_dict(const StateDict& state, bool strict = true);

  // A one-line-per-module summary, as printing a torch module.
  std::string to_string() const;

 protected:
  // Registers a parameter (made a leaf that requires grad when requires_grad) and returns its handle.
  Tensor register_parameter(std::string name, Tensor value, bool requires_grad = true);
  Tensor register_buffer(std::string name, Tensor value);
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    add_child(std::move(name), module);
    return module;
  }
  // Renames the module's type, as a module that changes role in place (BatchNorm2d -> SyncBatchNorm).
  void set_type_name(std::string name) { type_name_ = std::move(name); }
  // Extra text for to_string(), e.g. "in_features=2, out_features=3".
  virtual std::string extra_repr() const { return {}; }

 private:
  void add_child(std::string name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name) const;
  void collect(const std::string& prefix, bool params, bool recurse,
               std::vector<std::pair<std::string, Tensor>>& out) const;
  void describe(std::string& out, const std::string& name, int indent) const;

  std::string type_name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::map<int, PreHook> pre_hooks_;
  std::map<int, PostHook> post_hooks_;
  int next_hook_ = 0;
};

}  // namespace braid::nn
