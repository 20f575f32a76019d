// The DDP communication hooks a job can name (`ddp.comm_hook`), by name: how each bucket of gradients is
// reduced (parallel/ddp/comm_hook.h). Built in: allreduce (the default), fp16_compress, bf16_compress,
// quantize_per_tensor, quantize_per_channel (args: bucket_size), noop and powersgd (PowerSGDState's
// arguments; its error feedback and warm-start memory go into checkpoints). Plugins add their own
// (runtime/plugin/plugin.h); a hook with state gives NamedCommHook's state_dict and load_state_dict:
//
//   ddp: {mode: outside, comm_hook: fp16_compress}
//   ddp: {mode: outside, comm_hook: {kind: my_topk, args: {k: 64}}}
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collectives/core/process_group.h"
#include "parallel/ddp/comm_hook.h"
#include "runtime/job/job_spec.h"

namespace braid::runtime {

// What a definition's make() gets.
struct CommHookBuild {
  std::shared_ptr<collectives::ProcessGroup> group;  // the trainers' group that DDP reduces over
  const nlohmann::json& args;                        // ddp.comm_hook's args (an object; {} when absent)
};

struct CommHookDefinition {
  std::string name;
  std::string help;                     // one line
  std::vector<std::string> arg_names;   // any other key in the args is an error naming the hook
  // Called once per trainer, after its DistributedDataParallel is built; the hook's state lives in it.
  std::function<parallel::NamedCommHook(const CommHookBuild&)> make;
};

// Adds a hook; `origin` is the plugin's path ("" for braid's own). InvalidArgument for a taken name.
void register_comm_hook(CommHookDefinition definition, std::string origin = {});
const CommHookDefinition* find_comm_hook(const std::string& name);  // nullptr when unknown
std::string comm_hook_origin(const std::string& name);              // "" for built-ins and unknown names
std::vector<std::string> comm_hook_names();

// Checks ddp.comm_hook without making anything: a known name ("ddp.comm_hook: unknown comm hook 'x'
// (known: allreduce, ..., my_hook (plugin libmy.so))") and known argument names. Nothing to check when
// the job names no hook.
void validate_comm_hook(const DdpSpec& ddp);
// The job's hook over `group`; errors name the hook and, for a plugin's, the plugin.
parallel::NamedCommHook make_job_comm_hook(const DdpSpec& ddp, std::shared_ptr<collectives::ProcessGroup> group);

}  // namespace braid::runtime
