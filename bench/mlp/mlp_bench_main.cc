// One training step of an MLP, timed (the same as `braid bench mlp`; the work is in bench/mlp/mlp_bench.cc):
// zero_grad, forward, MSE loss, backward, SGD(momentum) step.
// The model is `layers` x (Linear(width, width) + ReLU) on a [batch, width] float32 input, built from
// parameters and autograd::linear / relu exactly as nn::Linear computes it. bench/mlp/mlp_torch.py times
// the same step in PyTorch and bench/run_mlp_bench.sh prints both side by side.
//
// OpenBLAS runs one thread unless --threads says otherwise (the comparison is single-threaded on both
// sides). Each step is timed on its own after the warm-up steps; the median is the figure to quote (a
// shared machine adds slow outliers, never fast ones). Phases are timed too, to show where a step goes.
//
// usage: bench_mlp [--layers 4] [--width 2048] [--batch 64] [--steps 20] [--warmup 3] [--threads 1]
// The last line is machine-readable: "RESULT braid median_ms=... min_ms=... forward_ms=... ...".
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/mlp/mlp_bench.h"

namespace {

struct Args {
  int64_t layers = 4;
  int64_t width = 2048;
  int64_t batch = 64;
  int steps = 20;
  int warmup = 3;
  int threads = 1;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::printf("usage: %s [--layers N] [--width N] [--batch N] [--steps N] [--warmup N] [--threads N]\n", argv[0]);
      std::exit(0);
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s needs a value\n", argv[0], flag.c_str());
      std::exit(2);
    }
    const long v = std::strtol(argv[++i], nullptr, 10);
    if (flag == "--layers") a.layers = v;
    else if (flag == "--width") a.width = v;
    else if (flag == "--batch") a.batch = v;
    else if (flag == "--steps") a.steps = static_cast<int>(v);
    else if (flag == "--warmup") a.warmup = static_cast<int>(v);
    else if (flag == "--threads") a.threads = static_cast<int>(v);
    else {
      std::fprintf(stderr, "%s: unknown flag %s (see --help)\n", argv[0], flag.c_str());
      std::exit(2);
    }
  }
  if (a.layers < 1 || a.width < 1 || a.batch < 1 || a.steps < 1 || a.warmup < 0 || a.threads < 1) {
    std::fprintf(stderr, "%s: every size and count must be positive\n", argv[0]);
    std::exit(2);
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  const braid::bench::MlpBenchOptions options{args.layers, args.width, args.batch, args.steps, args.warmup,
                                                args.threads};
  std::fputs(braid::bench::format_mlp_bench(options, braid::bench::run_mlp_bench(options)).c_str(), stdout);
  return 0;
}
