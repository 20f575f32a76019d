// `braid info`: what this build contains (version, compiler, sanitizers, each backend library's version
// or "off") and the devices this process sees. The first thing to run on a new machine or in a bug report.
#pragma once

#include <CLI/CLI.hpp>

#include "runtime/launch_env.h"

namespace braid::cli {

struct InfoOptions {
  bool json = false;
};

// Registers the subcommand on `app`; the options are filled in when it is parsed.
CLI::App* add_info_command(CLI::App& app, InfoOptions& options);

// Prints the report for this process (`env` says where it sits in the job) to stdout; returns the
// process exit code (0).
int run_info_command(const InfoOptions& options, const runtime::LaunchEnv& env);

}  // namespace braid::cli
