#include "runtime/models/comm_hook_registry.h"

#include <memory>
#include <utility>

#include "base/check.h"
#include "parallel/ddp/default_hooks.h"
#include "parallel/ddp/powersgd_hook.h"
#include "runtime/models/builtin_models.h"
#include "runtime/models/named_registry.h"

namespace braid::runtime {

namespace {

using parallel::NamedCommHook;

CommHookDefinition builtin(std::string name, std::string help, std::function<NamedCommHook(const CommHookBuild&)> make,
                           std::vector<std::string> arg_names = {}) {
  return {std::move(name), std::move(help), std::move(arg_names), std::move(make)};
}

// ddp.comm_hook: {kind: powersgd, args: {matrix_approximation_rank: 2, start_powersgd_iter: 10}}; the
// defaults are PyTorch's PowerSGDState's.
parallel::PowerSGDOptions powersgd_options(const CommHookBuild& b) {
  const detail::KeyReader args(b.args, "ddp.comm_hook.args");
  parallel::PowerSGDOptions o;
  o.matrix_approximation_rank = args.get_int("matrix_approximation_rank", o.matrix_approximation_rank);
  o.start_powersgd_iter = args.get_int("start_powersgd_iter", o.start_powersgd_iter);
  o.min_compression_rate = args.get_double("min_compression_rate", o.min_compression_rate);
  o.use_error_feedback = args.get_bool("use_error_feedback", o.use_error_feedback);
  o.warm_start = args.get_bool("warm_start", o.warm_start);
  o.orthogonalization_epsilon = args.get_double("orthogonalization_epsilon", o.orthogonalization_epsilon);
  const int64_t seed = args.get_int("random_seed", 0);
  BRAID_CHECK_ARG(seed >= 0, "ddp.comm_hook.args.random_seed: must be >= 0, got {}", seed);
  o.random_seed = static_cast<uint64_t>(seed);
  return o;
}

NamedCommHook make_powersgd(const CommHookBuild& b) {
  return parallel::powersgd_hook(std::make_shared<parallel::PowerSGDState>(b.group, powersgd_options(b)));
}

NamedCommHook make_batched_powersgd(const CommHookBuild& b) {
  return parallel::batched_powersgd_hook(std::make_shared<parallel::PowerSGDState>(b.group, powersgd_options(b)));
}

const std::vector<std::string> kPowerSGDArgs = {"matrix_approximation_rank", "start_powersgd_iter",
                                                "min_compression_rate",      "use_error_feedback",
                                                "warm_start",                "orthogonalization_epsilon",
                                                "random_seed"};

NamedRegistry<CommHookDefinition>& hooks() {
  static NamedRegistry<CommHookDefinition> r("comm hook");
  static const bool builtins_added = [] {
    const CommHookDefinition all[] = {
        builtin("allreduce", "average the bucket with an allreduce (the default)",
                [](const CommHookBuild& b) { return parallel::allreduce_hook(b.group); }),
        builtin("fp16_compress", "allreduce in float16, then back to the gradient's dtype",
                [](const CommHookBuild& b) { return parallel::fp16_compress_hook(b.group); }),
        builtin("bf16_compress", "allreduce in bfloat16, then back to the gradient's dtype",
                [](const CommHookBuild& b) { return parallel::bf16_compress_hook(b.group); }),
        builtin("quantize_per_tensor", "8-bit quantization of the whole bucket",
                [](const CommHookBuild& b) { return parallel::quantize_per_tensor_hook(b.group); }),
        builtin("quantize_per_channel", "8-bit quantization per channel of bucket_size elements (default 512)",
                [](const CommHookBuild& b) {
                  return parallel::quantize_per_channel_hook(
                      b.group, detail::KeyReader(b.args, "ddp.comm_hook.args").get_int("bucket_size", 512));
                },
                {"bucket_size"}),
        builtin("noop", "no communication: every trainer keeps its own gradients (for measurements)",
                [](const CommHookBuild&) { return parallel::noop_hook(); }),
        builtin("powersgd",
                "PowerSGD low-rank compression with error feedback (state kept in checkpoints); args as "
                "PowerSGDState's",
                make_powersgd, kPowerSGDArgs),
        builtin("batched_powersgd",
                "PowerSGD on the whole bucket as one zero-padded square matrix (fewer, larger products); args as "
                "powersgd's",
                make_batched_powersgd, kPowerSGDArgs),
    };
    for (const CommHookDefinition& d : all) r.add(d.name, d);
    return true;
  }();
  (void)builtins_added;
  return r;
}

const NamedRegistry<CommHookDefinition>::Entry& known_entry(const std::string& name) {
  const auto* e = hooks().find(name);
  if (e == nullptr) {
    BRAID_THROW(InvalidArgument, "ddp.comm_hook: unknown comm hook '{}'{} (known: {})", name,
                detail::did_you_mean(name, hooks().names()), hooks().describe_known());
  }
  return *e;
}

}  // namespace

void register_comm_hook(CommHookDefinition definition, std::string origin) {
  BRAID_CHECK_ARG(definition.make != nullptr, "register_comm_hook: hook '{}' has no make function", definition.name);
  const std::string name = definition.name;
  hooks().add(name, std::move(definition), std::move(origin));
}

const CommHookDefinition* find_comm_hook(const std::string& name) { return hooks().definition(name); }

std::string comm_hook_origin(const std::string& name) { return hooks().origin(name); }

std::vector<std::string> comm_hook_names() { return hooks().names(); }

void validate_comm_hook(const DdpSpec& ddp) {
  if (ddp.comm_hook.empty()) return;
  const auto& e = known_entry(ddp.comm_hook);
  detail::check_known_keys(ddp.comm_hook_args, e.definition.arg_names, "ddp.comm_hook.args",
                           fmt::format("argument of comm hook '{}'", ddp.comm_hook));
}

parallel::NamedCommHook make_job_comm_hook(const DdpSpec& ddp, std::shared_ptr<collectives::ProcessGroup> group) {
  const std::string name = ddp.comm_hook.empty() ? "allreduce" : ddp.comm_hook;
  const auto& e = known_entry(name);
  static const nlohmann::json kEmpty = nlohmann::json::object();
  const CommHookBuild build{std::move(group), ddp.comm_hook_args.is_object() ? ddp.comm_hook_args : kEmpty};
  try {
    NamedCommHook hook = e.definition.make(build);
    BRAID_CHECK_ARG(hook.hook != nullptr, "made no hook function");
    return hook;
  } catch (const std::exception& ex) {
    BRAID_THROW(InvalidArgument, "ddp.comm_hook: making comm hook '{}'{} failed: {}", name,
                NamedRegistry<CommHookDefinition>::marked(e.origin), ex.what());
  }
}

}  // namespace braid::runtime
