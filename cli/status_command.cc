#include "cli/status_command.h"

#include <fmt/format.h>

#include <chrono>

#include "base/check.h"
#include "cli/seconds_flag.h"
#include "runtime/job/job_spec.h"
#include "runtime/run/status_server.h"

namespace braid::cli {

CLI::App* add_status_command(CLI::App& app, StatusOptions& options) {
  CLI::App* status = app.add_subcommand("status", "Ask a running job's driver for its ranks, roles, state, step and "
                                                  "last heartbeats");
  status->add_option("job", options.job_file, "The job file (its status_file names the driver's address)")
      ->check(CLI::ExistingFile);
  status->add_option("--addr", options.addr, "The driver's HOST:PORT instead of a job file");
  status->add_flag("--json", options.json, "Print the status as one JSON object");
  status->add_flag("--trace", options.trace,
                   "Have every rank dump its collectives' flight recorder; print each rank's dump file");
  status->add_option("--timeout", options.timeout_s, "Seconds to wait for the answer")
      ->capture_default_str()
      ->check(seconds_flag());
  status->footer(
      "Examples:\n"
      "  braid status examples/digits/job.yaml      the job's driver, found through the job's status_file\n"
      "  braid status --addr 127.0.0.1:41234 --json  a driver by address, as JSON\n"
      "  braid status job.yaml --trace                every rank dumps its flight recorder (braid trace analyze)\n"
      "\n"
      "It prints each rank's role, state (serving, training, stopped), step and seconds since its last\n"
      "heartbeat. Exit 1 when the driver does not answer within --timeout, 2 when the job has no status file\n"
      "(it is not running, or another status_file was set).");
  return status;
}

int run_status_command(const StatusOptions& options) {
  BRAID_CHECK_ARG(options.job_file.empty() != options.addr.empty(),
                  "status: give a job file or --addr HOST:PORT (one of them)");
  runtime::StatusEndpoint endpoint{options.addr, std::nullopt};
  if (endpoint.address.empty()) {
    endpoint = runtime::read_status_address(runtime::parse_job_file(options.job_file).status_file);
  }
  const std::string& addr = endpoint.address;
  // With --addr the secret is this process's own (BRAID_JOB_SECRET, ...: docs/SECURITY.md).
  const auto status = runtime::query_status(addr, endpoint.secret,
                                            std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000)),
                                            options.trace ? "trace" : "status");
  if (status.contains("error")) BRAID_THROW(Error, "status: the driver at {} answered: {}", addr, status["error"].dump());
  if (options.json) {
    fmt::print("{}\n", status.dump());
  } else if (options.trace) {
    int missing = 0;
    for (const auto& r : status.value("trace", nlohmann::json::array())) {
      const std::string file = r.value("file", "");
      if (file.empty()) ++missing;
      fmt::print("rank {:>4}: {}\n", r.value("rank", -1),
                 !file.empty() ? file : r.contains("error") ? "no dump: " + r.value("error", "") : "no dump (no group records)");
    }
    return missing == 0 ? 0 : 1;
  } else {
    fmt::print("{}", runtime::format_status(status));
  }
  return 0;
}

}  // namespace braid::cli
