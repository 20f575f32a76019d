#include "cli/check_command.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>

#include "base/error.h"
#include "runtime/job/job_spec.h"
#include "runtime/models/model_registry.h"
#include "runtime/plugin/plugin_loader.h"

namespace braid::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitBadJob = 2;  // a bad job file is bad input, like a bad flag

// [0, 1, 2, 3, 5] → "0-3, 5".
std::string ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string summary(const CheckOptions& options, const runtime::JobSpec& job) {
  const auto& roles = job.roles;
  std::string who = fmt::format("trainers {}", ranks_text(roles.trainers));
  if (!roles.workers.empty()) who += fmt::format(", workers {}", ranks_text(roles.workers));
  who += roles.master ? fmt::format(", master {}", *roles.master)
                      : fmt::format(", no master: trainer {} drives", roles.trainers.front());
  const std::string length = job.train.steps > 0
                                 ? fmt::format("{} steps", job.train.steps)
                                 : fmt::format("{} epoch{}", job.train.epochs, job.train.epochs == 1 ? "" : "s");
  std::string parallel = job.fsdp.enabled ? fmt::format("fsdp {}", runtime::to_string(job.fsdp.sharding_strategy))
                                          : fmt::format("ddp {}", runtime::to_string(job.ddp.mode));
  const std::string optimizer = job.optimizer.kind == runtime::OptimizerKind::None
                                    ? "no optimizer"
                                    : fmt::format("{} lr {}", runtime::to_string(job.optimizer.kind), job.optimizer.lr);
  // "backend gloo" for a CPU job; "backend gloo (trainers over nccl), trainers on cuda, workers on cpu".
  std::string comm = fmt::format("backend {}", runtime::to_string(runtime::world_backend(job)));
  if (runtime::trainers_backend(job) != runtime::world_backend(job)) {
    comm += fmt::format(" (trainers over {})", runtime::to_string(runtime::trainers_backend(job)));
  }
  const bool any_cuda = job.devices.trainer() == runtime::DeviceKind::Cuda ||
                        (!roles.workers.empty() && job.devices.worker() == runtime::DeviceKind::Cuda);
  if (any_cuda) {
    comm += fmt::format(", trainers on {}", runtime::to_string(job.devices.trainer()));
    if (!roles.workers.empty()) comm += fmt::format(", workers on {}", runtime::to_string(job.devices.worker()));
  }
  return fmt::format("{}: ok — {}: {} ranks ({}), {}, model {}, {} of batch {} per trainer, {}, {}, data {}\n",
                     options.job_file, job.name, roles.world_size(), who, comm,
                     job.model.kind, length, job.train.batch_size, parallel, optimizer,
                     job.data.kind == runtime::DataKind::Registered ? job.data.kind_name
                                                                    : runtime::to_string(job.data.kind));
}

}  // namespace

CLI::App* add_check_command(CLI::App& app, CheckOptions& options) {
  CLI::App* cmd = app.add_subcommand("check", "Validate a job file (and its --set overrides) without running it");
  cmd->add_option("job", options.job_file, "The job file (YAML; docs/JOBS.md lists every key)")->required();
  cmd->add_option("--set", options.overrides,
                  "Override one key of the job: KEY=VALUE with a dotted key and a YAML value (repeatable)")
      ->allow_extra_args(false);
  cmd->add_flag("--print", options.print, "Print the resolved job (every key, defaults included) as JSON");
  cmd->add_option("--world-size", options.world_size, "Also check that the roles fit a job of this many processes")
      ->check(CLI::PositiveNumber);
  cmd->footer(
      "Examples:\n"
      "  braid check job.yaml                          ok, or the file, line, key and reason\n"
      "  braid check job.yaml --set optimizer.lr=0.1   the job with one key overridden\n"
      "  braid check job.yaml --set roles.trainers=[0,1] --set roles.workers=[2] --set roles.master=3\n"
      "  braid check job.yaml --print                  the resolved job as JSON (defaults and absolute paths)\n"
      "  braid check job.yaml --world-size 6           also check the roles against `mpirun -np 6`\n"
      "  braid check job.yaml --set model.plugin=build/libmy_net.so   a model from a plugin (docs/PLUGINS.md)\n"
      "\n"
      "Values are YAML: 0.1 is a number, true a boolean, [0, 1] a list, {kind: adam, lr: 0.001} a mapping,\n"
      "'\"4\"' a string. Paths are relative to the job file's directory. The job's plugins (plugins, model.plugin)\n"
      "are loaded, as `braid run` loads them on every rank. Exit codes: 0 ok, 2 a bad job file or plugin.\n"
      "The reference of every key: docs/JOBS.md.");
  return cmd;
}

int run_check_command(const CheckOptions& options) {
  try {
    runtime::JobSpec job = runtime::parse_job_file(options.job_file);
    runtime::apply_overrides(job, options.overrides);
    const std::vector<runtime::LoadedPlugin> plugins = runtime::load_job_plugins(job);
    runtime::validate_job_model(job);
    if (options.world_size > 0) runtime::check_world_size(job, options.world_size);
    std::string text = options.print ? runtime::to_json(job).dump(2) + "\n" : summary(options, job);
    if (!options.print) {
      for (const runtime::LoadedPlugin& p : plugins) text += fmt::format("  plugin {}\n", runtime::describe(p));
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return kExitOk;
  } catch (const InvalidArgument& e) {
    fmt::print(stderr, "braid check: {}\n", e.what());
    return kExitBadJob;
  }
}

}  // namespace braid::cli
