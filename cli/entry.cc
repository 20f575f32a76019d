// braid's command line: parses it, applies the global options (log levels, the rank/role stamp on log
// lines) and hands over to one subcommand. Each subcommand lives in its own file.
#include "cli/entry.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/logging.h"
#include "cli/bench_command.h"
#include "cli/check_command.h"
#include "cli/export_command.h"
#include "cli/info_command.h"
#include "cli/launch_command.h"
#include "cli/run_command.h"
#include "cli/status_command.h"
#include "cli/trace_command.h"
#include "runtime/build_info.h"
#include "runtime/launch_env.h"

namespace {

// Usage errors (a bad flag, a bad level) exit with 2, as most Unix tools do; failures at run time with 1.
constexpr int kExitUsage = 2;
constexpr int kExitFailure = 1;

constexpr const char* kDescription =
    "braid: a distributed deep-learning runtime.\n"
    "\n"
    "braid trains models over many processes: tensors on CPU and CUDA, collectives over MPI, Gloo and\n"
    "NCCL, RPC over TCP and UCX, DistributedDataParallel and distributed autograd. A job is one process\n"
    "per rank, started by a launcher (mpirun, srun); each process finds its rank and the job size in the\n"
    "launcher's environment (OMPI_COMM_WORLD_RANK/SIZE, SLURM_PROCID/SLURM_NTASKS or RANK/WORLD_SIZE).\n"
    "\n"
    "Training jobs: `mpirun -np 6 braid run examples/hybrid/job.yaml` runs the job file's roles, one per rank.\n"
    "Models, losses, data kinds and comm hooks of one's own come as plugins the job file names (docs/PLUGINS.md).";

constexpr const char* kFooter =
    "Examples:\n"
    "  mpirun -np 6 --oversubscribe braid run examples/hybrid/job.yaml\n"
    "                                      train the hybrid parameter-server model (4 trainers, a worker, a master)\n"
    "  braid info                          what this build contains and which devices it sees\n"
    "  braid info --json                   the same, as one JSON object\n"
    "  braid check job.yaml                validate a job file without running it (docs/JOBS.md)\n"
    "  braid trace analyze /tmp/braid-trace-ID  which rank is stuck in which collective (flight-recorder dumps)\n"
    "  braid export ckpt -o model.safetensors\n"
    "                                      a checkpoint's trained model as one safetensors file\n"
    "  mpirun -np 4 braid info             one report per rank (add --oversubscribe on a small machine)\n"
    "  srun -n 8 braid info                the same under Slurm\n"
    "  braid launch -n 2 -- braid info     the same without MPI: ranks on this machine, env:// rendezvous\n"
    "  braid --log-level debug info        more logging for this run\n"
    "  mpirun -np 4 -x BRAID_LOG_LEVEL=warn,braid.rpc=debug braid info\n"
    "                                      levels per logger, exported to every rank with -x\n"
    "\n"
    "Environment:\n"
    "  BRAID_LOG_LEVEL       log levels: a default level, then logger=level pairs, e.g.\n"
    "                        \"warn,braid.rpc=debug\"; levels trace, debug, info, warn, error, critical, off.\n"
    "                        BRAID_LOG is read when BRAID_LOG_LEVEL is unset; --log-level wins over both.\n"
    "  BRAID_CPU_CACHE_BYTES how much freed CPU tensor memory braid keeps for reuse.\n"
    "\n"
    "Every option and variable: docs/CONFIG.md. Log lines read\n"
    "  [time] [logger] [level] [rank R/W role] message";

int usage_error(const std::string& message) {
  fmt::print(stderr, "braid: {}\nRun 'braid --help' for usage.\n", message);
  return kExitUsage;
}

// Levels: --log-level when given, else the environment. Both are checked here, before any work, so that a
// typo in a level is a clear usage error rather than an exception from the first log call.
std::optional<int> apply_log_levels(const std::string& spec) {
  try {
    if (!spec.empty()) {
      braid::logging::set_levels(spec);
    } else {
      braid::logging::init_from_env();
    }
  } catch (const braid::InvalidArgument& e) {
    const std::string source = spec.empty() ? "BRAID_LOG_LEVEL/BRAID_LOG" : "--log-level '" + spec + "'";
    return usage_error("invalid " + source + ": " + e.what());
  }
  return std::nullopt;
}

}  // namespace

int braid::cli::run_main(int argc, char** argv) {
  CLI::App app{kDescription, "braid"};
  app.footer(kFooter);
  app.set_version_flag("--version", braid::runtime::version_line(), "Print the version and build type, then exit");
  // At most one subcommand; "none" is checked after parsing so that an unknown flag is reported as such.
  app.require_subcommand(0, 1);
  app.fallthrough();  // global options are accepted after the subcommand too: `braid info --log-level debug`

  std::string log_spec;
  app.add_option("--log-level", log_spec,
                 "Log levels for this run, e.g. 'debug' or 'warn,braid.rpc=debug' (overrides BRAID_LOG_LEVEL)");

  braid::cli::InfoOptions info_options;
  CLI::App* info = braid::cli::add_info_command(app, info_options);
  braid::cli::BenchOptions bench_options;
  CLI::App* bench = braid::cli::add_bench_command(app, bench_options);
  braid::cli::CheckOptions check_options;
  CLI::App* check = braid::cli::add_check_command(app, check_options);
  braid::cli::RunOptions run_options;
  CLI::App* run = braid::cli::add_run_command(app, run_options);
  braid::cli::StatusOptions status_options;
  CLI::App* status = braid::cli::add_status_command(app, status_options);
  braid::cli::LaunchCommandOptions launch_options;
  CLI::App* launch = braid::cli::add_launch_command(app, launch_options);
  braid::cli::ExportOptions export_options;
  CLI::App* export_cmd = braid::cli::add_export_command(app, export_options);
  braid::cli::TraceOptions trace_options;
  CLI::App* trace = braid::cli::add_trace_command(app, trace_options);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help and --version
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints CLI11's message and its hint
    return kExitUsage;
  }

  if (app.get_subcommands().empty()) {
    fmt::print(stderr, "{}\n", app.help());
    return usage_error("a subcommand is required");
  }
  if (auto code = apply_log_levels(log_spec)) return *code;

  try {
    const braid::runtime::LaunchEnv env = braid::runtime::detect_launch_env();
    // No role yet: roles come from the job, which the runtime layer will read.
    braid::runtime::stamp_log_identity(env, "");
    braid::logging::get("braid.cli")
        ->debug("launcher {}, rank {} of {}", braid::runtime::launcher_name(env.launcher), env.rank,
                env.world_size);
    if (info->parsed()) return braid::cli::run_info_command(info_options, env);
    if (bench->parsed()) return braid::cli::run_bench_command(*bench, bench_options);
    if (check->parsed()) return braid::cli::run_check_command(check_options);
    if (run->parsed()) {
      run_options.levels_given = !log_spec.empty() || std::getenv("BRAID_LOG_LEVEL") || std::getenv("BRAID_LOG");
      return braid::cli::run_run_command(run_options, env);
    }
    if (status->parsed()) return braid::cli::run_status_command(status_options);
    if (launch->parsed()) return braid::cli::run_launch_command(launch_options);
    if (export_cmd->parsed()) return braid::cli::run_export_command(export_options);
    if (trace->parsed()) return braid::cli::run_trace_command(*trace, trace_options);
  } catch (const braid::InvalidArgument& e) {
    return usage_error(e.what());
  } catch (const std::exception& e) {
    fmt::print(stderr, "braid: error: {}\n", e.what());
    return kExitFailure;
  }
  return usage_error("no command ran");  // unreachable while every subcommand is dispatched above
}
