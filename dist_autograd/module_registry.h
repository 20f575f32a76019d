// The module classes a RemoteModule can create, by name: braid's stand-in for PyTorch passing
// `module_cls` (a Python class, pickled by reference) to the remote worker.
//
//   dist_autograd::register_module_class("RemoteNet", [](const rpc::Args& a) {
//     return std::make_shared<RemoteNet>(a.at(0).as_int());
//   });
//   RemoteModule net("worker1/cpu", "RemoteNet", {Value(int64_t{5})});
//
// The registry is process-wide, and the worker that owns a module is the one that looks its class up: every
// worker that may own one registers the same classes before init_rpc (registering later is safe, but a
// call that arrives first fails with "unknown module class"). Names are unique; re-registering one is an
// InvalidArgument naming it.
//
// Built in, with PyTorch's argument order and keyword names (arguments left out take PyTorch's defaults;
// a default-only argument braid does not implement must keep its default, else InvalidArgument):
//   "nn.Linear"        (in_features, out_features, bias=True)
//   "nn.Embedding"     (num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
//                       scale_grad_by_freq=False, sparse=False)
//   "nn.EmbeddingBag"  (num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
//                       scale_grad_by_freq=False, mode='mean', sparse=False, _weight=None,
//                       include_last_offset=False, padding_idx=None)
// Their parameters are drawn from the owner's default generator, as the local constructors do.
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "rpc/value.h"

namespace braid::dist_autograd {

using ModuleFactory = std::function<std::shared_ptr<nn::Module>(const rpc::Args& args)>;

// InvalidArgument for an empty name, a duplicate or an empty factory.
void register_module_class(const std::string& name, ModuleFactory factory);
bool has_module_class(const std::string& name);
// Every registered name, sorted (built-ins included).
std::vector<std::string> module_class_names();
// Runs the factory of `name` (InvalidArgument "unknown module class '<name>' (registered: ...)"); a
// factory that returns null is an InvalidArgument too.
std::shared_ptr<nn::Module> make_module(const std::string& name, const rpc::Args& args);

// Reads a factory's arguments as Python binds them: positional first, then keywords, each by name, with
// defaults. Errors name the class and the argument ("nn.Linear: missing argument 'out_features'",
// "nn.Linear: got an unexpected keyword argument 'bais'", "nn.Linear: takes at most 3 arguments (4
// given)", "nn.Linear: argument 'bias' appears both positionally and by keyword").
class ArgReader {
 public:
  // `names`: the parameters in order. Checks at once that there are not more positional arguments than
  // names, that every keyword is one of the names, and that none is given twice.
  ArgReader(std::string cls, const rpc::Args& args, std::vector<std::string> names);

  // The argument `name` (nullptr when not given).
  const rpc::Value* find(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  int64_t get_int(const std::string& name, int64_t fallback) const;
  bool get_bool(const std::string& name, bool fallback) const;
  double get_double(const std::string& name, double fallback) const;
  std::string get_string(const std::string& name, const std::string& fallback) const;
  // Fails unless `name` is absent or None: for arguments that braid only supports at their default.
  void require_none(const std::string& name) const;

 private:
  const rpc::Value& at(const std::string& name) const;

  std::string cls_;
  const rpc::Args& args_;
  std::vector<std::string> names_;
};

}  // namespace braid::dist_autograd
