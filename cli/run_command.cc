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
  run->footer(
      "Examples:\n"
      "  mpirun -np 6 --oversubscribe braid run examples/hybrid/train.yaml\n"
      "      the hybrid parameter-server model: 4 trainers with DDP, a worker holding the remote parts, a master\n"
      "  braid launch -n 4 -- braid run examples/digits/job.yaml\n"
      "      the digits classifier without MPI: 4 trainers on this machine (env:// rendezvous)\n"
      "  srun --mpi=pmix -n 4 braid run examples/fsdp/job.yaml     under Slurm (deploy/slurm/)\n"
      "  mpirun -np 6 --oversubscribe braid run examples/hybrid/job.yaml --steps 3 \\\n"
      "      --set optimizer.kind=none --set ddp.mode=inside --dump-grads grads.jsonl\n"
      "      PyTorch's ddp_under_dist_autograd_test exactly, each trainer's gradients written per step\n"
      "  braid run job.yaml --set checkpoint.dir=ckpt --set checkpoint.interval=100   (then --resume)\n"
      "\n"
      "While it runs: one progress line per log.interval steps (step, epoch, loss, samples/s, ETA),\n"
      "log.metrics as JSON lines, `braid status job.yaml` for every rank's state. SIGTERM or SIGUSR1 to\n"
      "any rank (or to mpirun / braid launch): checkpoint and stop cleanly. A rank that dies ends the job\n"
      "within failure.timeout_s, naming the rank and its role. Exit codes: 0 done or stopped on a signal,\n"
      "1 a failure, 2 a bad job file or command line.");
  return run;
}

int run_run_command(const RunOptions& options, const runtime::LaunchEnv& env) {
  runtime::JobSpec job = runtime::parse_job_file(options.job_file);
  std::vector<std::string> overrides = options.sets;
  if (options.steps > 0) overrides.push_back(fmt::format("train.steps={}", options.steps));
  runtime::apply_overrides(job, overrides);
  // The job's level, unless the command line or the environment chose; the RPC transport's lines about
  // connections opening and closing (every rank's, at the end of every job) only from warn up.
  if (!options.levels_given) logging::set_levels(job.log.level + (job.log.level == "info" ? ",braid.rpc=warn" : ""));
  runtime::RunOptions run;
  run.resume = options.resume;
  run.restart_count = env.restart_count;
  if (!options.dump_grads.empty()) run.dump_grads = std::filesystem::absolute(options.dump_grads).string();
  return runtime::run_job(job, env, run);
}

}  // namespace braid::cli
