// The collectives benchmark behind `braid bench collectives`: one collective at a series of message sizes,
// through braid's ProcessGroup and, side by side on the same buffers, through the raw engine underneath it
// (MPI_Allreduce & co., gloo's algorithms on a gloo context of its own, ncclAllReduce & co.), printed as
// nccl-tests-style rows with the ratio braid/raw. bench/torch_allreduce.py prints the same columns for
// PyTorch's gloo all_reduce; docs/PERFORMANCE.md has the measured tables and bench/README.md the method.
//
// Method, per size (every rank runs the same loop):
//   1. check: the inputs get a pattern that is a formula of rank and index, one braid op runs, and the
//      output is compared element by element with the formula's value rounded to the dtype (#wrong, summed
//      over ranks); never inside a timed loop;
//   2. warm-up: `warmup` ops through braid, then through the raw engine; without --iters the warm-up also
//      times the ops, and the iteration count is chosen (the same on every rank) so that the size takes
//      about `seconds_per_size` in all, but at least `min_iters` per round (large sizes would otherwise get
//      one or two calls a round, and one preempted call would move the row by tens of percent);
//   3. `rounds` rounds, each one barrier + a block of iterations through braid and one through the raw
//      engine (the side that goes first alternates). A side's time is its best round, where a round's time
//      is the slowest rank's mean time per op in that round. Alternating rounds let both sides see the same
//      machine load. The paired figures compare the two sides within each round (braid/raw and braid - raw
//      of the same round) and take the median over rounds: load that changes between rounds moves both
//      sides of a pair, so they hold still where the best rounds of the two sides, taken from different
//      minutes, do not.
// Buffers are allocated once per size and reused by every iteration (first touch of fresh pages costs more
// than a small collective).
//
// Launch: under mpirun the store comes from collectives/mpi's bootstrap (MPI itself); otherwise from
// store::rendezvous (init_method, env:// by default); a process started by no launcher runs alone. The
// raw MPI reference needs mpirun (an env:// job has no MPI_COMM_WORLD spanning its ranks).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace braid::bench {

enum class BenchOp { Allreduce, Allgather, Broadcast, ReduceScatter, Alltoall };

struct CollectivesBenchOptions {
  std::string backend = "gloo";              // mpi, gloo or nccl
  std::vector<std::string> ops{"allreduce"};  // names of BenchOp, or "all"
  std::string sizes = "4K..64M";             // "A..B" (times `factor`), "A,B,C" or one size; K/M/G = 2^10/20/30 bytes
  int64_t factor = 2;
  std::string dtype = "float32";  // float32, float64, int32, int64, float16, bfloat16
  int iters = 0;                  // timed iterations per round and side; 0 chooses them from the warm-up
  int min_iters = 5;              // the least that choice may give
  int warmup = 5;                 // untimed iterations per side and size
  int rounds = 3;
  double seconds_per_size = 0.4;  // target for the adaptive iteration count (both sides, every round)
  bool raw = true;                // run the raw-engine reference
  bool raw_nonblocking = false;   // mpi: the reference calls MPI_Iallreduce & co. + MPI_Wait instead
  bool check = true;              // the #wrong check
  // Diagnostic: wait for each braid op by polling Work::is_completed() (with sched_yield) instead of
  // blocking in Work::wait(); the difference is what waking the caller costs.
  bool poll_wait = false;
  int threads = 2;                // gloo lanes (torch's `threads`)
  // Two-level collectives (collectives/hier/) of the braid group: "auto" (the default policy: on when the
  // ranks span hosts with several on some host, unless BRAID_HIERARCHY=0), "on", "off", or "both": every op
  // on two groups, one with and one without, each next to the same raw reference.
  std::string hierarchy = "auto";
  std::string init_method;        // "" = mpirun bootstrap when under mpirun, else env://
  int timeout_s = 300;            // per op and for the rendezvous
};

struct CollectivesBenchRow {
  int64_t requested_bytes = 0;  // the size asked for; `bytes` rounds it to whole elements and rank blocks
  int64_t bytes = 0;  // the largest buffer one rank holds (allgather: output, reduce_scatter: input)
  int64_t count = 0;  // elements in `bytes`
  double time_us = 0;
  double algbw_gbs = 0;
  double busbw_gbs = 0;
  int64_t wrong = -1;  // -1 when not checked
  std::optional<double> raw_time_us;  // empty without a raw reference for this op and dtype
  std::optional<double> raw_busbw_gbs;
  std::optional<double> paired_ratio;        // median over rounds of braid/raw in the same round
  std::optional<double> paired_overhead_us;  // median over rounds of braid - raw per call in the same round
  int iters = 0;  // per round and side
  // Process CPU time per call (every thread), summed over ranks; for the raw side, empty without it.
  double cpu_us = 0;
  std::optional<double> raw_cpu_us;
};

struct CollectivesBenchTable {
  BenchOp op = BenchOp::Allreduce;
  std::string raw_name;  // "MPI_Allreduce", "gloo::allreduce", ... ("" without a raw reference)
  std::string hierarchy = "auto";  // the braid group's: "auto", "on" or "off"
  uint64_t hier_ops = 0;           // ops this rank ran through the two-level engine in this table
  std::vector<CollectivesBenchRow> rows;
};

// Byte sizes from "4K..64M" (factor steps), "4K,1M,16M" or "1M". Throws InvalidArgument on bad input.
std::vector<int64_t> parse_bench_sizes(const std::string& spec, int64_t factor);
BenchOp parse_bench_op(const std::string& name);
std::string bench_op_name(BenchOp op);
// nccl-tests' bus bandwidth factor: allreduce 2(n-1)/n, allgather / reduce_scatter / alltoall (n-1)/n,
// broadcast 1.
double bus_factor(BenchOp op, int ranks);

// Runs the benchmark on this rank. Rank 0 passes each output line to `emit` as soon as it has it (the
// header, one row per size, the summary and a machine-readable "RESULT collectives ..." line per op);
// other ranks emit nothing. Returns the tables (complete on rank 0; other ranks get their own rows
// without the cross-rank figures). Throws InvalidArgument on bad options.
std::vector<CollectivesBenchTable> run_collectives_bench(const CollectivesBenchOptions& options,
                                                         const std::function<void(const std::string&)>& emit);

}  // namespace braid::bench
