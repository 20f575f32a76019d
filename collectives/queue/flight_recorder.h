// FlightRecorder: the last N ops of one group, kept in a ring so that a hang can be read after the fact
// (torch's NCCL flight recorder, TORCH_NCCL_TRACE_BUFFER_SIZE). Each entry holds the op's sequence number,
// name, element counts in and out, dtype, state (scheduled, started, completed, failed) and the wall-clock
// times of each state change, so that the dumps of different ranks can be lined up.
//
// Cost: the ring is allocated once, in the constructor; recording an op writes a fixed-size slot under an
// uncontended mutex, three times per op (scheduled by the issuing thread, started and ended by the thread
// that runs it), and allocates nothing. Times are steady-clock readings the group takes anyway (for the
// deadline and the elapsed time), except the end's; they become wall-clock times when dumped. `braid bench
// trace` (bench/trace/trace_bench.h) measures the cost.
//
// Dumps (trace::dump_all): one JSON file per process, "<dir>/rank-<rank>.json", holding every live
// recorder of the process. The directory is BRAID_TRACE_DIR, else the one the job runtime sets (the job's
// directory), else /tmp/braid-trace-<job id>. A dump happens when the stall watchdog fires (health_monitor.h),
// when an op fails or times out, on SIGUSR2, on abort (runtime) and on `braid status --trace`.
// `braid trace analyze DIR` reads them (runtime/trace/trace_analysis.h).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/deadline.h"
#include "collectives/core/engine.h"
#include "tensor/dtype.h"

namespace braid::collectives {

enum class TraceState : uint8_t { Scheduled, Started, Completed, Failed };
std::string_view to_string(TraceState s);

// What an op reads and writes: element counts over every tensor, and the first tensor's dtype.
struct TraceIo {
  int64_t in_numel = 0;
  int64_t out_numel = 0;
  DType dtype = DType::Float32;
};

struct TraceEntry {
  uint64_t seq = 0;     // 0: the slot was never used
  const char* op = "";  // a string literal: the op's name
  TraceIo io;
  TraceState state = TraceState::Scheduled;
  // Steady clock (base/deadline.h's Clock) in entries(); wall clock (system_clock), ns since the epoch, in
  // dumps; 0 until the state is reached.
  int64_t scheduled_ns = 0;
  int64_t started_ns = 0;
  int64_t ended_ns = 0;
};

// What the stall watchdog found about an op, kept for the dump (the analyzer reads it when the stalled
// rank itself could not dump).
struct StallNote {
  uint64_t seq = 0;
  std::string op;
  double waited_s = 0;
  std::vector<int> never_joined;                        // ranks with no published progress
  std::vector<std::pair<int, uint64_t>> behind;         // (rank, the last op it was seen waiting in)
  std::string unknown;                                  // why the missing ranks are unknown ("" if known)
};

class FlightRecorder {
 public:
  // `capacity` 0 records nothing (BRAID_TRACE_BUFFER_SIZE=0).
  FlightRecorder(GroupShape shape, std::string backend, size_t capacity);
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  size_t capacity() const { return ring_.size(); }
  const GroupShape& shape() const { return shape_; }

  // The op's life: `op` must be a string literal (it is kept, not copied). started/ended of an op whose
  // slot was reused since (more than capacity ops later) are ignored.
  void scheduled(uint64_t seq, const char* op, const TraceIo& io, Clock::time_point now);
  void started(uint64_t seq, Clock::time_point now);
  void ended(uint64_t seq, bool ok);
  void note_stall(StallNote note);

  // The entries, oldest first.
  std::vector<TraceEntry> entries() const;
  // This group's part of a dump: one JSON object.
  std::string to_json() const;

 private:
  TraceEntry* slot_locked(uint64_t seq);

  const GroupShape shape_;
  const std::string backend_;
  mutable std::mutex mu_;
  std::vector<TraceEntry> ring_;  // GUARDED_BY(mu_); slot seq % capacity
  uint64_t last_seq_ = 0;         // GUARDED_BY(mu_): the newest seq scheduled
  std::vector<StallNote> stalls_; // GUARDED_BY(mu_): the last few watchdog findings
};

// The process-wide side: every recorder made is registered here, so that a signal, an abort or the status
// server can dump them all.
namespace trace {

// BRAID_TRACE_BUFFER_SIZE (default 2000; 0 turns the recorder off). Throws InvalidArgument on junk.
size_t buffer_size_from_env();
// Keeps a weak reference; installs the SIGUSR2 handler on first use, unless the program has its own.
void register_recorder(const std::shared_ptr<FlightRecorder>& recorder);
// Where dumps go: BRAID_TRACE_DIR, else `set_default_dir`'s (the job runtime's), else /tmp/braid-trace-<id>.
std::string dump_dir();
void set_default_dir(std::string dir);
// Writes every live recorder to "<dump_dir()>/rank-<rank>.json" (atomically: a temporary file, then a rename)
// and returns the path; "" when no recorder is live. Logs and returns "" on failure: a dump happens on error
// paths and must not add its own. `reason` is stored in the file ("stall", "timeout", "SIGUSR2", ...).
std::string dump_all(std::string_view reason);
// Whether SIGUSR2 arrived since the last call (the group monitors poll this and dump).
bool take_signal_request();

}  // namespace trace

}  // namespace braid::collectives
