#include "bench/mlp/mlp_bench.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "bench/bench_stats.h"
#include "nn/optim/sgd.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"

namespace braid::bench {
namespace {

using Clock = std::chrono::steady_clock;

// U(-1/sqrt(in), 1/sqrt(in)), as nn::Linear initialises weight and bias.
Tensor uniform_param(const Shape& shape, int64_t fan_in, Generator& gen) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  Tensor t = braid::sub(braid::mul(braid::rand(shape, DType::Float32, &gen), 2.0 * bound), bound);
  autograd::set_requires_grad(t);
  return t;
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

MlpBenchResult run_mlp_bench(const MlpBenchOptions& o) {
  BRAID_CHECK_ARG(o.layers >= 1 && o.width >= 1 && o.batch >= 1 && o.steps >= 1 && o.warmup >= 0 && o.threads >= 1,
                  "bench mlp: every size and count must be positive (layers {}, width {}, batch {}, steps {}, "
                  "warmup {}, threads {})", o.layers, o.width, o.batch, o.steps, o.warmup, o.threads);
  openblas_set_num_threads(o.threads);

  Generator gen(0);
  std::vector<Tensor> weights, biases, params;
  for (int64_t l = 0; l < o.layers; ++l) {
    weights.push_back(uniform_param({o.width, o.width}, o.width, gen));
    biases.push_back(uniform_param({o.width}, o.width, gen));
    params.push_back(weights.back());
    params.push_back(biases.back());
  }
  const Tensor x = braid::randn({o.batch, o.width}, DType::Float32, &gen);
  const Tensor target = braid::randn({o.batch, o.width}, DType::Float32, &gen);
  nn::optim::SGD opt(params, nn::optim::SGDOptions{.lr = 0.01, .momentum = 0.9});

  std::vector<double> total, fwd, bwd, upd;
  MlpBenchResult r;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    const auto t0 = Clock::now();
    opt.zero_grad();
    Tensor h = x;
    for (int64_t l = 0; l < o.layers; ++l) h = autograd::relu(autograd::linear(h, weights[l], biases[l]));
    const Tensor loss = autograd::mse_loss(h, target);
    const auto t1 = Clock::now();
    autograd::backward(loss);
    const auto t2 = Clock::now();
    opt.step();
    const auto t3 = Clock::now();
    r.loss = loss.item<double>();
    if (s < o.warmup) continue;
    total.push_back(ms(t3 - t0));
    fwd.push_back(ms(t1 - t0));
    bwd.push_back(ms(t2 - t1));
    upd.push_back(ms(t3 - t2));
  }
  r.median_ms = median(total);
  r.min_ms = *std::min_element(total.begin(), total.end());
  r.max_ms = *std::max_element(total.begin(), total.end());
  r.forward_ms = median(fwd);
  r.backward_ms = median(bwd);
  r.step_ms = median(upd);
  return r;
}

std::string format_mlp_bench(const MlpBenchOptions& o, const MlpBenchResult& r) {
  std::string out = fmt::format("braid MLP step: {} x (Linear({}, {}) + ReLU), batch {}, float32, {} OpenBLAS thread(s)\n",
                                o.layers, o.width, o.width, o.batch, o.threads);
  out += fmt::format("  {} steps after {} warm-up: median {:.2f} ms, min {:.2f} ms, max {:.2f} ms (loss {:.6f})\n",
                     o.steps, o.warmup, r.median_ms, r.min_ms, r.max_ms, r.loss);
  out += fmt::format("  phases (median): forward+loss {:.2f} ms, backward {:.2f} ms, SGD step {:.2f} ms\n",
                     r.forward_ms, r.backward_ms, r.step_ms);
  out += fmt::format("RESULT braid median_ms={:.3f} min_ms={:.3f} forward_ms={:.3f} backward_ms={:.3f} step_ms={:.3f}\n",
                     r.median_ms, r.min_ms, r.forward_ms, r.backward_ms, r.step_ms);
  return out;
}

}  // namespace braid::bench
