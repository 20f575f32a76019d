// `braid status [JOB.yaml | --addr HOST:PORT] [--json] [--trace]`: asks a running job's driver for its ranks,
// roles, state, step and each rank's last heartbeat; with --trace, has every rank dump its collectives'
// flight recorder instead and prints where (`braid trace analyze DIR` reads them). The driver's address comes from the job's status_file.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace braid::cli {

struct StatusOptions {
  std::string job_file;
  std::string addr;
  bool json = false;
  bool trace = false;
  double timeout_s = 10;
};

CLI::App* add_status_command(CLI::App& app, StatusOptions& options);
int run_status_command(const StatusOptions& options);

}  // namespace braid::cli
