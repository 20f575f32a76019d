// `braid run JOB.yaml [--steps N] [--resume] [--dump-grads FILE] [--set KEY=VALUE]...`: every process of a
// job runs it (under mpirun, srun or braid launch); docs/RUNTIME.md describes what happens.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/launch_env.h"

namespace braid::cli {

struct RunOptions {
  std::string job_file;
  int64_t steps = 0;  // 0: the job file's train.steps
  bool resume = false;
  std::string dump_grads;
  std::vector<std::string> sets;
  // Whether --log-level or BRAID_LOG_LEVEL/BRAID_LOG chose the levels; else the job's log.level does.
  bool levels_given = false;
};

CLI::App* add_run_command(CLI::App& app, RunOptions& options);
// Reads the job (InvalidArgument for a bad file or --set, before anything starts) and runs it.
int run_run_command(const RunOptions& options, const runtime::LaunchEnv& env);

}  // namespace braid::cli
