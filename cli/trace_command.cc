#include "cli/trace_command.h"

#include <fmt/format.h>

#include "runtime/trace/trace_analysis.h"

namespace braid::cli {

CLI::App* add_trace_command(CLI::App& app, TraceOptions& options) {
  CLI::App* trace = app.add_subcommand("trace", "Read the collectives' flight-recorder dumps");
  trace->require_subcommand(1);
  CLI::App* analyze = trace->add_subcommand(
      "analyze", "Say which rank is stuck in which collective, and which ranks never entered it");
  analyze->add_option("dir", options.dir, "The dump directory (BRAID_TRACE_DIR, else /tmp/braid-trace-<job id>)")
      ->required();
  analyze->footer(
      "Each rank dumps rank-<r>.json there when the stall watchdog fires (failure.stall_warn_s,\n"
      "BRAID_STALL_WARN_S), when an op fails or times out, on SIGUSR2, on abort and on `braid status --trace`.\n"
      "Exit 0: no hang; 1: a hang was found; 2: no dump could be read, or some could not and no hang was found.");
  return trace;
}

int run_trace_command(const CLI::App& trace, const TraceOptions& options) {
  (void)trace;  // one subcommand so far: analyze
  const runtime::TraceAnalysis a = runtime::analyze_trace_dir(options.dir);
  fmt::print("{}", a.text);
  return a.exit_code();
}

}  // namespace braid::cli
