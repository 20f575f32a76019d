// The DistributedDataParallel benchmark behind `braid bench ddp`: the price of DDP's gradient
// synchronisation on a training step. bench/torch_ddp.py times the same step with PyTorch 1.13's DDP over
// gloo; bench/run_ddp_bench.sh runs both, interleaved, and prints the ratios; docs/PERFORMANCE.md has the
// measured tables.
//
// Model: `layers` x (Linear(width, width) + ReLU) (nn::Linear, nn::ReLU in an nn::Sequential, weights from
// Generator(seed)), on a (batch, width) float32 input per rank, MSE loss against a random target, SGD(lr
// 0.01, momentum 0.9). Every rank holds two copies of the model and times, alternating step by step:
//   single  the plain model on this rank's batch: zero_grad (set to none), forward, loss, backward, step;
//   ddp     the same through DistributedDataParallel over a `backend` group of every rank: the gradients
//           are averaged over the ranks while backward runs.
// Both ranks run both rows at the same time (a barrier before each step), so the single row sees the same
// machine load as the DDP row: it is what a rank would take without DDP. The ratio ddp / single is DDP's
// overhead; braid aims at <= 1.25x (kTargetRatio, ddp_bench_report.cc).
//
// Before the timing, one DDP backward on each rank's slice of a global batch is compared with the plain
// model's backward on the whole global batch (the average of the slices' MSE gradients): the largest
// |difference| is printed and a mismatch (allclose, rtol 1e-4, atol 1e-6) fails the run.
//
// Overlap: after every timed DDP step the Reducer's logging data gives the communication time, the share of
// it that ran while backward was still computing, and when each bucket was launched; the bench prints their
// medians, with the launch times relative to the start of backward (the call of autograd::backward).
//
// Launch: as `braid bench rpc` (bench/bench_job.h): under mpirun the store comes from collectives/mpi's
// bootstrap, otherwise from store::rendezvous (init_method, env:// by default). Exactly 2 processes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace braid::bench {

struct DdpBenchOptions {
  std::string backend = "gloo";  // "mpi" or "gloo"
  int iters = 30;                // timed steps per row
  int warmup = 5;                // untimed steps per row first (the bucket rebuild happens in the first)
  int64_t layers = 4;
  int64_t width = 2048;
  int64_t batch = 64;            // rows per rank
  double bucket_cap_mb = 25;
  bool gradient_as_bucket_view = false;
  // "builtin": DDP's own averaging (no hook registered); "allreduce", "noop", "fp16": the built-in comm hooks
  // of parallel/ddp/default_hooks.h (noop: no communication at all, for the reducer's own cost).
  std::string comm_hook = "builtin";
  int threads = 1;               // OpenBLAS threads of each process
  int gloo_threads = 2;          // lanes of a gloo group
  uint64_t seed = 0;             // weights; input and target from seed + 1
  std::string init_method;       // "" = mpirun's bootstrap under mpirun, else env://
  int timeout_s = 300;           // rendezvous and collectives
};

// One row's statistics over the timed steps, ms.
struct DdpBenchRow {
  std::string name;
  double p50 = 0, mean = 0, min = 0, max = 0;
  double forward = 0, backward = 0, step = 0;  // medians of each phase (forward includes zero_grad, loss)
};

// Medians over the timed DDP steps of what the Reducer's logging data reports.
struct DdpBenchOverlap {
  double backward_compute_ms = 0;    // first gradient ready -> last gradient ready
  double comm_ms = 0;                // first bucket launched -> every bucket reduced
  double overlap_fraction = 0;       // share of comm_ms while backward was still computing
  double first_ready_ms = 0;         // backward called -> first gradient ready
  double tail_ms = 0;                // last gradient ready -> backward returned (waiting + writing back)
  std::vector<double> launch_ms;     // per bucket: backward called -> bucket launched
  std::vector<size_t> bucket_bytes;  // per bucket, in reduction order
  // Bucket allreduces of the timed steps, and how many of them went through the group's shared memory
  // (ProcessGroup::empty_shared) rather than the engine.
  uint64_t bucket_reductions = 0;
  uint64_t shared_reductions = 0;
};

struct DdpBenchResult {
  int rank = 0, size = 0;
  double max_abs_diff = 0;           // of the gradient check (every rank's largest)
  DdpBenchRow single, ddp;
  DdpBenchOverlap overlap;
  std::string workers;               // "#   worker<r>: pid ... on host" lines
};

// Runs the benchmark in this process (one rank of the job); `print` gets rank 0's table. Throws
// InvalidArgument on bad options or a job that is not 2 processes, InternalError when the gradients differ.
DdpBenchResult run_ddp_bench(const DdpBenchOptions& options, const std::function<void(const std::string&)>& print);

// The table (with a final "RESULT ddp ..." line) of one run.
std::string format_ddp_bench(const DdpBenchOptions& options, const DdpBenchResult& result);

}  // namespace braid::bench
