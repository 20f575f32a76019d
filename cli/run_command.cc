#include "cli/run_command.h"

#include <fmt/format.h>

#include <filesystem>

#include "base/logging.h"
#include "runtime/job/job_spec.h"
#include "runtime/run/run_job.h"

namespace braid::cli {

CLI::App* add_run_command(CLI::App& app, RunOptions& options) {
  CLI::App* run = app.add_subcommand(
      "run",
      "Run a training job: every process of the job runs this, under a launcher (mpirun -np N, srun, "
      "braid launch -n N); the job file's roles say what each rank does. docs/RUNTIME.md, docs/JOBS.md");
  run->add_option("job", options.job_file, "The job file (YAML)")->required()->check(CLI::ExistingFile);
  run->add_option("--steps", options.steps, "Run this many steps (overrides train.steps)")
      ->check(CLI::PositiveNumber);
  run->add_flag("--resume", options.resume, "Continue from the latest checkpoint in checkpoint.dir");
  run->add_option("--dump-grads", options.dump_grads,
                  "Write each trainer's gradients of every step and micro-batch to FILE as JSON lines");
  run->add_option("--set", options.sets, "Override a job-file key, e.g. --set optimizer.lr=0.1 (repeatable)");
  return run;
}

int run_run_command(const RunOptions& options, const runtime::LaunchEnv& env) {
  runtime::JobSpec job = runtime::parse_job_file(options.job_file);
  for (const std::string& s : options.sets) runtime::apply_override(job, s);
  if (options.steps > 0) runtime::apply_override(job, fmt::format("train.steps={}", options.steps));
  // The job's level, unless the command line or the environment chose; the RPC transport's lines about
  // connections opening and closing (every rank's, at the end of every job) only from warn up.
  if (!options.levels_given) logging::set_levels(job.log.level + (job.log.level == "info" ? ",braid.rpc=warn" : ""));
  runtime::RunOptions run;
  run.resume = options.resume;
  if (!options.dump_grads.empty()) run.dump_grads = std::filesystem::absolute(options.dump_grads).string();
  return runtime::run_job(job, env, run);
}

}  // namespace braid::cli
