// The FSDP training-step benchmark behind `braid bench fsdp` (and bench/fsdp/fsdp_bench_main.cc): an MLP of
// `layers` x Linear(width, width) with ReLUs between (nn::MLP), each Linear its own FSDP unit under the root, trained with MSE + SGD on
// a [batch, width] float32 input, once per sharding strategy. Per strategy: the median step time (forward,
// backward, SGD step; every rank starts a step at a barrier) and the growth of the process's resident
// memory across forward on rank 0 — FULL_SHARD frees each layer's gathered weights after its forward,
// SHARD_GRAD_OP keeps them until backward, NO_SHARD holds them all the time. Also per configuration: the
// bytes of parameters + gradients + optimizer state rank 0 holds at its peak (bench/fsdp/fsdp_bench_meter.h)
// and its VmHWM. DDP and UNSHARDED run the same model for comparison. Numbers to read next to the model
// size, not a pass/fail test.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace braid::bench {

struct FsdpBenchOptions {
  std::string backend = "gloo";
  int64_t layers = 8;
  int64_t width = 1024;
  int64_t batch = 16;
  int steps = 10;
  int warmup = 2;  // untimed steps first; they allocate every buffer
  // FULL_SHARD, SHARD_GRAD_OP, NO_SHARD (the names of parallel::fsdp::to_string); DDP (the same model
  // under DistributedDataParallel) and UNSHARDED (the plain model on every rank, no communication: the
  // baseline of the memory columns) for comparison.
  std::vector<std::string> strategies = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"};
  std::string optimizer = "sgd";  // sgd (no state) or adam (two state tensors per parameter)
  std::string init_method;  // empty: mpirun's bootstrap, else env://
};

struct FsdpBenchRow {
  std::string strategy;
  double median_ms = 0;
  double forward_rss_mib = 0;  // rank 0's VmRSS growth across forward, the largest over timed steps
  // Parameters + gradients + optimizer state of rank 0 (StateMeter): the peak over the timed steps, the
  // sample at the optimizer step, and the optimizer state alone.
  int64_t peak_state_bytes = 0;
  double peak_state_mib = 0;
  double step_state_mib = 0;
  double optimizer_mib = 0;
  double hwm_mib = 0;  // rank 0's VmHWM after the configuration ran (the process's peak so far)
  // Every tensor's memory at once at its peak over the timed steps (CpuAllocator::stats().peak_bytes).
  double peak_tensors_mib = 0;
};

// Joins the job (init_process_group), runs every strategy, leaves it (destroy_process_group). `print`
// receives rank 0's header, one line per strategy as it finishes and a "RESULT fsdp ..." line each;
// other ranks print nothing. Throws InvalidArgument for non-positive sizes or an unknown strategy.
std::vector<FsdpBenchRow> run_fsdp_bench(const FsdpBenchOptions& options,
                                         const std::function<void(const std::string&)>& print);

}  // namespace braid::bench
