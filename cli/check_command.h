// `braid check JOB.yaml`: reads and validates a job file, with its `--set` overrides, without starting
// anything — the same checks `braid run` makes before it bootstraps. Prints a one-line summary, or the
// resolved job as JSON with --print; a bad job file exits 2 with the file, the key and the reason.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace braid::cli {

struct CheckOptions {
  std::string job_file;
  std::vector<std::string> overrides;  // --set KEY=VALUE, applied in order
  bool print = false;
  int world_size = 0;  // 0: not checked
};

// Registers the subcommand on `app`; the options are filled in when it is parsed.
CLI::App* add_check_command(CLI::App& app, CheckOptions& options);

// Checks the job and prints the result; returns the exit code (0, or 2 for a bad job file or override).
int run_check_command(const CheckOptions& options);

}  // namespace braid::cli
