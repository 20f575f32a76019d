// `braid status [JOB.yaml | --addr HOST:PORT] [--json]`: asks a running job's driver for its ranks, roles,
// state, step and each rank's last heartbeat. The driver's address comes from the job's status_file.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace braid::cli {

struct StatusOptions {
  std::string job_file;
  std::string addr;
  bool json = false;
  double timeout_s = 10;
};

CLI::App* add_status_command(CLI::App& app, StatusOptions& options);
int run_status_command(const StatusOptions& options);

}  // namespace braid::cli
