// `braid trace analyze DIR`: reads every rank's flight-recorder dump (collectives/queue/flight_recorder.h,
// "rank-<r>.json") and says, for each process group, whether it is stuck: in which op (sequence number,
// name, dtype, sizes), which ranks are inside it, which never entered it, and which ranks left no dump
// (stopped, dead, or not dumped). A rank without a dump is placed through what its peers' stall watchdogs
// read from the store (the "stalls" notes in their dumps).
//
// The logic lives here, below the command line, so that it can be tested on files written by tests.
#pragma once

#include <string>
#include <vector>

namespace braid::runtime {

struct TraceAnalysis {
  // The report, ready to print: one block per group, then the dumps that could not be read.
  std::string text;
  // Some group has an op that a rank started and did not finish.
  bool hang = false;
  // Dumps that could not be read (missing ranks, corrupt or partial files), one line each.
  std::vector<std::string> problems;
  // How many dump files were read.
  int dumps_read = 0;

  // 1: a hang was found; 2: nothing usable, or unreadable dumps and no hang (the answer is incomplete);
  // 0: every dump was read and no group is stuck.
  int exit_code() const;
};

// Throws InvalidArgument naming `dir` when it does not exist or holds no dump at all.
TraceAnalysis analyze_trace_dir(const std::string& dir);

}  // namespace braid::runtime
