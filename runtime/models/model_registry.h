// The models a job file can name (`model.kind`), by name. A definition says how to build the module each
// trainer runs and which parts live on workers (built there by the driver, through RemoteModule, before
// any trainer starts).
//
// Built in (docs/JOBS.md lists their arguments):
//   linear          nn.Linear(in, out, bias)
//   embedding_bag   nn.EmbeddingBag(num_embeddings, embedding_dim, mode, sparse) over int64 indices
//   mlp             Linear-ReLU stacks: {in, hidden: [..], out, dropout}
//   sequential      the job file's `model.layers`: linear, relu, tanh, gelu, sigmoid, dropout, layer_norm,
//                   embedding, flatten
//   hybrid          the parameter-server HybridModel of torch's ddp_under_dist_autograd_test: RemoteEM and
//                   RemoteNet on a worker, fc1 and fc2 local; ddp.mode inside wraps fc2
//   fsdp_nested     the FSDP tests' NestedWrappedModule, transformer: TransformerWithSharedParams
//
// Users add their own through a plugin (runtime/plugin/plugin.h, docs/PLUGINS.md), which the job names
// with model.plugin or plugins; a program that links braid may also call register_model() itself before
// the runtime starts:
//
//   runtime::register_model({.name = "my_net", .help = "two layers",
//                            .build = [](const ModelBuild& b) { return std::make_shared<MyNet>(b.arg_int("width")); }});
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dist_autograd/remote_module.h"
#include "nn/module.h"
#include "runtime/job/job_spec.h"

namespace braid::runtime {

// A module that lives on a worker: `module_class` is a dist_autograd module class (module_registry.h),
// created with `args` on the worker chosen by the driver (round-robin over the job's workers, or the one
// the model's `args.worker` names).
struct RemotePart {
  std::string name;          // "em", "net": how build() finds it, and its parameters' name prefix
  std::string module_class;  // e.g. "braid.RemoteEM"
  rpc::Args args;
};

// What a definition's build() gets.
struct ModelBuild {
  const nlohmann::json& args;  // model.args (an object; {} when absent)
  const nlohmann::json& layers;  // model.layers (an array; [] when absent)
  uint64_t init_seed = 0;
  // The remote parts, in the order remote_parts() gave them, already created on their workers.
  std::vector<std::shared_ptr<dist_autograd::RemoteModule>> remote;
  // Set when ddp.mode is inside: the model passes its designated sub-module through it and keeps what it
  // returns (a DistributedDataParallel of that sub-module) in its place.
  std::function<std::shared_ptr<nn::Module>(std::shared_ptr<nn::Module>)> wrap_inside;

  // Typed argument access with the definition's defaults; InvalidArgument "model.args.<key>: <reason>".
  int64_t arg_int(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const;
  double arg_double(const std::string& key, std::optional<double> fallback = std::nullopt) const;
  bool arg_bool(const std::string& key, std::optional<bool> fallback = std::nullopt) const;
  std::string arg_string(const std::string& key, std::optional<std::string> fallback = std::nullopt) const;
  std::vector<int64_t> arg_ints(const std::string& key, std::optional<std::vector<int64_t>> fallback = std::nullopt) const;
};

struct ModelDefinition {
  std::string name;
  std::string help;  // one line for `braid check --models`
  // The argument names build() accepts; any other key in model.args is an error naming the model.
  std::vector<std::string> arg_names;
  // The parts to create on workers (none for a local model). A model with remote parts needs a job with
  // at least one worker.
  std::function<std::vector<RemotePart>(const nlohmann::json& args)> remote_parts;
  // The trainer's module. Called once per trainer, after the remote parts exist.
  std::function<std::shared_ptr<nn::Module>(const ModelBuild&)> build;
  // Whether ddp.mode inside is meaningful (the model calls wrap_inside on one sub-module).
  bool supports_inside_ddp = false;
};

// InvalidArgument for an empty or taken name or a definition without build(). `origin` is the plugin's
// path ("" for braid's own and a program's), for messages.
void register_model(ModelDefinition definition, std::string origin = {});
std::string model_origin(const std::string& name);  // "" for built-ins and unknown names
// nullptr when unknown.
const ModelDefinition* find_model(const std::string& name);
// InvalidArgument "model.kind: unknown model '<name>' (registered: a, b, c)".
const ModelDefinition& get_model(const std::string& name);
std::vector<std::string> model_names();  // sorted, built-ins included
// get_model(kind).build(build), with whatever it throws rethrown as InvalidArgument naming the plugin (if
// any), the kind and `where` ("rank 1 (trainer 1 of 2)"): "plugin /p/libx.so: model 'x' threw while
// building on rank 1 (...): <what>". Also InvalidArgument when it returns no module, and OutOfMemoryError
// "model 'x' ran out of memory while building on ... (model.args {...}): <what was allocated>" when memory
// ran out.
std::shared_ptr<nn::Module> build_model(const std::string& kind, const ModelBuild& build, const std::string& where);

// Checks a spec's model against its definition without building anything (braid check): known kind, known
// argument names, layers well-formed for "sequential", inside DDP supported if asked.
void validate_model(const ModelSpec& model, DdpMode ddp_mode, bool has_workers);
// validate_model() for a parsed job, then its loss and comm hook names, with the job file named in the
// message as the parser names it ("<file>: model.args.in: ..."): what `braid check` and `braid run` call
// after parsing, overrides and loading the job's plugins.
void validate_job_model(const JobSpec& job);

}  // namespace braid::runtime
