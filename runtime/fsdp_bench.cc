#include "runtime/fsdp_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>

#include "autograd/engine.h"
#include "autograd/ops/nn_ops.h"
#include "base/check.h"
#include "collectives/backends/world.h"
#include "nn/container.h"
#include "nn/optim/sgd.h"
#include "parallel/fsdp/fully_shard.h"
#include "tensor/factory.h"
#include "tensor/random.h"

namespace braid::runtime {
namespace {

namespace fsdp = parallel::fsdp;
using Clock = std::chrono::steady_clock;

// Resident memory of this process in MiB (VmRSS of /proc/self/status); 0 where there is no /proc.
double rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      double kib = 0;
      status >> kib;
      return kib / 1024.0;
    }
    status.ignore(1 << 20, '\n');
  }
  return 0;
}

fsdp::ShardingStrategy parse_strategy(const std::string& name) {
  using S = fsdp::ShardingStrategy;
  for (S s : {S::FULL_SHARD, S::SHARD_GRAD_OP, S::NO_SHARD}) {
    if (fsdp::to_string(s) == name) return s;
  }
  BRAID_THROW(InvalidArgument, "bench fsdp: unknown strategy '{}' (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD)", name);
}

FsdpBenchRow run_one(const FsdpBenchOptions& o, fsdp::ShardingStrategy strategy) {
  auto group = collectives::default_group();
  Generator gen(1);
  auto model = std::make_shared<nn::MLP>(std::vector<int64_t>(static_cast<size_t>(o.layers) + 1, o.width), true, &gen);
  fsdp::FSDPOptions options;
  options.strategy = strategy;
  fsdp::apply_fully_shard(*model, group, options, fsdp::module_type_policy({"Linear"}));
  nn::optim::SGD opt(model->parameters(), {.lr = 1e-3});
  const Tensor x = rand({o.batch, o.width}, {}, &gen);
  const Tensor y = rand({o.batch, o.width}, {}, &gen);

  std::vector<double> times;
  double rss_growth = 0;
  for (int step = 0; step < o.warmup + o.steps; ++step) {
    group->barrier()->wait();
    const auto start = Clock::now();
    const double before = rss_mib();
    const Tensor loss = autograd::mse_loss((*model)(x), y);
    const double after = rss_mib();
    autograd::backward(loss);
    opt.step();
    opt.zero_grad();
    const auto end = Clock::now();
    if (step < o.warmup) continue;
    rss_growth = std::max(rss_growth, after - before);
    times.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  std::sort(times.begin(), times.end());
  return {fsdp::to_string(strategy), times[times.size() / 2], rss_growth};
}

}  // namespace

std::vector<FsdpBenchRow> run_fsdp_bench(const FsdpBenchOptions& o,
                                         const std::function<void(const std::string&)>& print) {
  BRAID_CHECK_ARG(o.layers >= 1 && o.width >= 1 && o.batch >= 1 && o.steps >= 1 && o.warmup >= 0,
                  "bench fsdp: every size and count must be positive (layers {}, width {}, batch {}, steps {}, "
                  "warmup {})",
                  o.layers, o.width, o.batch, o.steps, o.warmup);
  BRAID_CHECK_ARG(!o.strategies.empty(), "bench fsdp: no strategy to run");
  std::vector<fsdp::ShardingStrategy> strategies;
  for (const auto& name : o.strategies) strategies.push_back(parse_strategy(name));

  collectives::InitOptions init;
  init.init_method = o.init_method;
  collectives::init_process_group(o.backend, init);
  const int rank = collectives::get_rank();
  const int ranks = collectives::get_world_size();
  const double model_mib = static_cast<double>(o.layers * (o.width * o.width + o.width)) * 4.0 / 1048576.0;
  if (rank == 0) {
    print(fmt::format("# braid bench fsdp: {} ranks, backend {}, {} x Linear({}, {}) (one unit each), batch {} per "
                      "rank, {:.1f} MiB of float32 parameters, {} timed steps after {} warm-up\n",
                      ranks, o.backend, o.layers, o.width, o.width, o.batch, model_mib, o.steps, o.warmup));
    print(fmt::format("# {:<14} {:>14} {:>26}\n", "strategy", "step p50 (ms)", "RSS growth in forward (MiB)"));
  }
  std::vector<FsdpBenchRow> rows;
  for (fsdp::ShardingStrategy s : strategies) {
    rows.push_back(run_one(o, s));
    const FsdpBenchRow& r = rows.back();
    if (rank == 0) {
      print(fmt::format("  {:<14} {:>14.2f} {:>26.1f}\n", r.strategy, r.median_ms, r.forward_rss_mib));
      print(fmt::format("RESULT fsdp strategy={} ranks={} backend={} layers={} width={} median_ms={:.3f} "
                        "forward_rss_mib={:.1f}\n",
                        r.strategy, ranks, o.backend, o.layers, o.width, r.median_ms, r.forward_rss_mib));
    }
  }
  collectives::destroy_process_group();
  return rows;
}

}  // namespace braid::runtime
