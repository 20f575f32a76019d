// One training step of an MLP, timed: zero_grad, forward, MSE loss, backward, SGD(momentum) step.
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
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/variable.h"
#include "nn/optim/sgd.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"

namespace {

using braid::Tensor;
using Clock = std::chrono::steady_clock;

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

// U(-1/sqrt(in), 1/sqrt(in)), as nn::Linear initialises weight and bias.
Tensor uniform_param(const braid::Shape& shape, int64_t fan_in, braid::Generator& gen) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  Tensor t = braid::sub(braid::mul(braid::rand(shape, braid::DType::Float32, &gen), 2.0 * bound), bound);
  braid::autograd::set_requires_grad(t);
  return t;
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  openblas_set_num_threads(args.threads);

  braid::Generator gen(0);
  std::vector<Tensor> weights, biases, params;
  for (int64_t l = 0; l < args.layers; ++l) {
    weights.push_back(uniform_param({args.width, args.width}, args.width, gen));
    biases.push_back(uniform_param({args.width}, args.width, gen));
    params.push_back(weights.back());
    params.push_back(biases.back());
  }
  const Tensor x = braid::randn({args.batch, args.width}, braid::DType::Float32, &gen);
  const Tensor target = braid::randn({args.batch, args.width}, braid::DType::Float32, &gen);
  braid::nn::optim::SGD opt(params, braid::nn::optim::SGDOptions{.lr = 0.01, .momentum = 0.9});

  std::vector<double> total, fwd, bwd, upd;
  double last_loss = 0.0;
  for (int s = 0; s < args.warmup + args.steps; ++s) {
    const auto t0 = Clock::now();
    opt.zero_grad();
    Tensor h = x;
    for (int64_t l = 0; l < args.layers; ++l) {
      h = braid::autograd::relu(braid::autograd::linear(h, weights[l], biases[l]));
    }
    const Tensor loss = braid::autograd::mse_loss(h, target);
    const auto t1 = Clock::now();
    braid::autograd::backward(loss);
    const auto t2 = Clock::now();
    opt.step();
    const auto t3 = Clock::now();
    last_loss = loss.item<double>();
    if (s < args.warmup) continue;
    total.push_back(ms(t3 - t0));
    fwd.push_back(ms(t1 - t0));
    bwd.push_back(ms(t2 - t1));
    upd.push_back(ms(t3 - t2));
  }

  const double med = median(total);
  std::printf("braid MLP step: %lld x (Linear(%lld, %lld) + ReLU), batch %lld, float32, %d OpenBLAS thread(s)\n",
              static_cast<long long>(args.layers), static_cast<long long>(args.width),
              static_cast<long long>(args.width), static_cast<long long>(args.batch), args.threads);
  std::printf("  %d steps after %d warm-up: median %.2f ms, min %.2f ms, max %.2f ms (loss %.6f)\n", args.steps,
              args.warmup, med, *std::min_element(total.begin(), total.end()),
              *std::max_element(total.begin(), total.end()), last_loss);
  std::printf("  phases (median): forward+loss %.2f ms, backward %.2f ms, SGD step %.2f ms\n", median(fwd),
              median(bwd), median(upd));
  std::printf("RESULT braid median_ms=%.3f min_ms=%.3f forward_ms=%.3f backward_ms=%.3f step_ms=%.3f\n", med,
              *std::min_element(total.begin(), total.end()), median(fwd), median(bwd), median(upd));
  return 0;
}
