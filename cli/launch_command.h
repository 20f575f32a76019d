// `braid launch -n N [options] -- COMMAND ARGS...`: N ranks of COMMAND on this machine, without MPI, each
// with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set for braid's env://
// rendezvous. The work is runtime::launcher::launch(); this file only maps the command line onto it.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

namespace braid::cli {

struct LaunchCommandOptions {
  int nprocs = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  bool no_prefix = false;
  double kill_timeout_s = 10;
  double term_timeout_s = 60;
  // Unset: the job file's failure.max_restarts / failure.backoff_s when the command is `braid run JOB`,
  // else no restart.
  std::optional<int> max_restarts;
  std::optional<double> restart_backoff_s;
  std::vector<std::string> command;
};

// Registers the subcommand on `app`; the options are filled in when it is parsed.
CLI::App* add_launch_command(CLI::App& app, LaunchCommandOptions& options);

// Runs the job and returns the launcher's exit code: 0 when every rank exited 0, else the first failed
// rank's code (128 + signal number when a signal killed it).
int run_launch_command(const LaunchCommandOptions& options);

}  // namespace braid::cli
