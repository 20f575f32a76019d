// `braid trace analyze DIR`: which rank is stuck in which op, from the flight-recorder dumps in DIR
// (runtime/trace/trace_analysis.h). Exit 1 when a hang is found, 2 when the dumps are missing or unreadable.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace braid::cli {

struct TraceOptions {
  std::string dir;
};

CLI::App* add_trace_command(CLI::App& app, TraceOptions& options);
int run_trace_command(const CLI::App& trace, const TraceOptions& options);

}  // namespace braid::cli
