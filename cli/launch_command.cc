#include "cli/launch_command.h"

#include <chrono>
#include <filesystem>

#include "cli/run_command.h"
#include "cli/seconds_flag.h"
#include "runtime/job/job_spec.h"
#include "runtime/launcher/launcher.h"
#include "runtime/run/roles.h"

namespace braid::cli {
namespace {

constexpr const char* kFooter =
    "Everything after '--' is the command each rank runs; a command named 'braid' runs this braid\n"
    "executable. Every rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and\n"
    "MASTER_PORT (what the env:// rendezvous reads; rank 0 hosts the store on MASTER_ADDR:MASTER_PORT).\n"
    "Output is prefixed line by line with \"[rank R] \" (stdout to stdout, stderr to stderr).\n"
    "SIGINT, SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 are forwarded to every rank. When a rank exits with a\n"
    "non-zero code or is killed by a signal, the others get SIGTERM, then SIGKILL after --kill-timeout,\n"
    "and the launcher exits with that rank's code (128 + signal number for a signal).\n"
    "With --max-restarts N (or failure.max_restarts in the job file of `braid run JOB`) a failed job is\n"
    "started again, all ranks, up to N times, each after --restart-backoff seconds, with BRAID_RESTART_COUNT\n"
    "one higher: braid run then resumes from the latest complete checkpoint in checkpoint.dir. Exit code 2\n"
    "(a bad job file or command line) and a launcher stopped by a signal are not restarted.\n"
    "\n"
    "Examples:\n"
    "  braid launch -n 2 -- braid info                  one report per rank, launched by env\n"
    "  braid launch -n 6 -- braid run examples/hybrid/job.yaml --steps 3\n"
    "                                                    the hybrid training job on its 6 ranks\n"
    "  braid launch -n 2 -- sh -c 'echo rank $RANK of $WORLD_SIZE'\n"
    "  braid launch -n 8 --master-port 29500 --kill-timeout 30 -- ./my_program\n"
    "  braid launch -n 4 --max-restarts 3 -- braid run job.yaml --set checkpoint.dir=ckpt --set checkpoint.interval=50\n"
    "                                                    survives 3 failures, losing at most 50 steps each\n"
    "\n"
    "For more than one machine use mpirun or srun: docs/DEPLOY.md.";

// The job a `braid run JOB [options]` command runs (braid named by any path), read as that command will
// (the file and its --set overrides); nullopt for any other command, or one this cannot read: braid run
// then reports the error.
std::optional<runtime::JobSpec> job_of_command(const std::vector<std::string>& command) {
  if (command.size() < 3 || std::filesystem::path(command[0]).filename() != "braid" || command[1] != "run") {
    return std::nullopt;
  }
  try {
    CLI::App app;
    RunOptions run;
    add_run_command(app, run);
    std::vector<std::string> args(command.rbegin(), command.rend() - 1);  // CLI11 takes them reversed
    app.parse(args);
    runtime::JobSpec job = runtime::parse_job_file(run.job_file);
    runtime::apply_overrides(job, run.sets);
    return job;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

CLI::App* add_launch_command(CLI::App& app, LaunchCommandOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "launch", "Run N ranks of a command on this machine (no MPI needed), output prefixed by rank");
  cmd->add_option("-n,--nprocs", options.nprocs, "Number of ranks")->required()->check(CLI::Range(1, 4096));
  cmd->add_option("--master-addr", options.master_addr, "Address rank 0's store listens on (MASTER_ADDR)")
      ->capture_default_str();
  cmd->add_option("--master-port", options.master_port, "Port of rank 0's store (MASTER_PORT); 0 picks a free one")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_flag("--no-prefix", options.no_prefix,
                "Let the ranks write straight to this terminal, without \"[rank R] \" (lines may then mix)");
  cmd->add_option("--kill-timeout", options.kill_timeout_s,
                  "Seconds between SIGTERM and SIGKILL when a rank failed and the others are stopped")
      ->capture_default_str()
      ->check(seconds_flag());
  cmd->add_option("--term-timeout", options.term_timeout_s,
                  "Seconds the ranks have to finish (checkpoint) after the launcher got SIGINT/SIGTERM, "
                  "before SIGKILL")
      ->capture_default_str()
      ->check(seconds_flag());
  cmd->add_option("--max-restarts", options.max_restarts,
                  "Start a failed job again, every rank, at most N times (braid run resumes from its latest "
                  "checkpoint); default: the job file's failure.max_restarts, else 0")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--restart-backoff", options.restart_backoff_s,
                  "Seconds between a failed job's end and its restart; default: failure.backoff_s, else 1")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("command", options.command, "The command every rank runs, after '--'")->required();
  cmd->footer(kFooter);
  return cmd;
}

int run_launch_command(const LaunchCommandOptions& options) {
  using Millis = std::chrono::milliseconds;
  runtime::launcher::LaunchOptions o;
  o.nprocs = options.nprocs;
  o.master_addr = options.master_addr;
  o.master_port = options.master_port;
  o.prefix_output = !options.no_prefix;
  o.kill_timeout = Millis(static_cast<int64_t>(options.kill_timeout_s * 1000));
  o.term_timeout = Millis(static_cast<int64_t>(options.term_timeout_s * 1000));
  o.command = options.command;
  o.braid_executable = runtime::launcher::current_executable();
  const std::optional<runtime::JobSpec> job = job_of_command(options.command);
  o.max_restarts = options.max_restarts.value_or(job ? job->failure.max_restarts : 0);
  const double backoff_s = options.restart_backoff_s.value_or(job ? job->failure.backoff_s : 1.0);
  o.restart_backoff = Millis(static_cast<int64_t>(backoff_s * 1000));
  if (job && static_cast<int>(job->roles.world_size()) == options.nprocs) {
    o.describe_rank = [job = *job](int rank) { return runtime::describe_rank(job, rank); };
  }
  return runtime::launcher::launch(o);
}

}  // namespace braid::cli
