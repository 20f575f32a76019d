// The MLP training-step benchmark behind `braid bench mlp` (and bench/mlp/mlp_bench_main.cc): zero_grad,
// forward through `layers` x (Linear(width, width) + ReLU), MSE loss, backward, SGD(momentum) step, on a
// [batch, width] float32 input. Each step after the warm-up is timed on its own; the median is the figure
// to quote. bench/mlp/mlp_torch.py times the same step in PyTorch (bench/run_mlp_bench.sh compares).
#pragma once

#include <cstdint>
#include <string>

namespace braid::bench {

struct MlpBenchOptions {
  int64_t layers = 4;
  int64_t width = 2048;
  int64_t batch = 64;
  int steps = 20;
  int warmup = 3;
  int threads = 1;  // OpenBLAS threads (the comparison with PyTorch is single-threaded on both sides)
};

struct MlpBenchResult {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  double forward_ms = 0, backward_ms = 0, step_ms = 0;  // medians per phase
  double loss = 0;
};

// Throws InvalidArgument for non-positive sizes or counts.
MlpBenchResult run_mlp_bench(const MlpBenchOptions& options);
// The human-readable lines plus a final machine-readable "RESULT braid median_ms=..." line.
std::string format_mlp_bench(const MlpBenchOptions& options, const MlpBenchResult& result);

}  // namespace braid::bench
