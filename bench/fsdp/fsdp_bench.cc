#include "bench/fsdp/fsdp_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>

#include "autograd/engine.h"
#include "autograd/ops/nn_ops.h"
#include "base/check.h"
#include "bench/fsdp/fsdp_bench_meter.h"
#include "collectives/registry/group_registry.h"
#include "nn/container.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "parallel/ddp/ddp.h"
#include "parallel/fsdp/fully_shard.h"
#include "tensor/allocator.h"
#include "tensor/factory.h"
#include "tensor/random.h"

namespace braid::bench {
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

// Peak resident memory of this process in MiB (VmHWM).
double hwm_mib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      double kib = 0;
      status >> kib;
      return kib / 1024.0;
    }
    status.ignore(1 << 20, '\n');
  }
  return 0;
}

void check_strategy(const std::string& name) {
  for (const char* known : {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "DDP", "UNSHARDED"}) {
    if (name == known) return;
  }
  BRAID_THROW(InvalidArgument,
              "bench fsdp: unknown strategy '{}' (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, DDP, UNSHARDED)", name);
}

fsdp::ShardingStrategy fsdp_strategy(const std::string& name) {
  using S = fsdp::ShardingStrategy;
  for (S s : {S::FULL_SHARD, S::SHARD_GRAD_OP, S::NO_SHARD}) {
    if (fsdp::to_string(s) == name) return s;
  }
  BRAID_THROW(InvalidArgument, "bench fsdp: '{}' is no FSDP strategy", name);
}

std::unique_ptr<nn::optim::Optimizer> make_optimizer(const std::string& name, const nn::TensorList& params) {
  if (name == "adam") return std::make_unique<nn::optim::Adam>(params, nn::optim::AdamOptions{.lr = 1e-4});
  BRAID_CHECK_ARG(name == "sgd", "bench fsdp: unknown optimizer '{}' (sgd, adam)", name);
  return std::make_unique<nn::optim::SGD>(params, nn::optim::SGDOptions{.lr = 1e-3});
}

// One configuration: FSDP with a unit per Linear (and the root), DDP over the whole model, or the plain
// model on each rank with no communication at all (the unsharded baseline of the memory columns).
FsdpBenchRow run_one(const FsdpBenchOptions& o, const std::string& strategy) {
  auto group = collectives::default_group();
  Generator gen(1);
  auto model = std::make_shared<nn::MLP>(std::vector<int64_t>(static_cast<size_t>(o.layers) + 1, o.width), true, &gen);
  std::shared_ptr<nn::Module> step_model = model;
  if (strategy == "DDP") {
    parallel::DDPOptions d;
    d.process_group = group;
    step_model = std::make_shared<parallel::DistributedDataParallel>(model, d);
  } else if (strategy != "UNSHARDED") {
    fsdp::FSDPOptions options;
    options.strategy = fsdp_strategy(strategy);
    fsdp::apply_fully_shard(*model, group, options, fsdp::module_type_policy({"Linear"}));
  }
  StateMeter meter(*model);
  auto opt = make_optimizer(o.optimizer, model->parameters());
  const Tensor x = rand({o.batch, o.width}, {}, &gen);
  const Tensor y = rand({o.batch, o.width}, {}, &gen);

  std::vector<double> times;
  double rss_growth = 0;
  for (int step = 0; step < o.warmup + o.steps; ++step) {
    if (step == o.warmup) {  // the warm-up created the optimizer state
      meter.reset_peak();
      CpuAllocator::instance().reset_peak();
    }
    group->barrier()->wait();
    const auto start = Clock::now();
    const double before = rss_mib();
    const Tensor loss = autograd::mse_loss((*step_model)(x), y);
    const double after = rss_mib();
    autograd::backward(loss);
    opt->step();
    const auto end = Clock::now();
    meter.after_step(*opt);  // untimed
    opt->zero_grad();
    if (step < o.warmup) continue;
    rss_growth = std::max(rss_growth, after - before);
    times.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  std::sort(times.begin(), times.end());
  constexpr double kMiB = 1048576.0;
  FsdpBenchRow row;
  row.strategy = strategy;
  row.median_ms = times[times.size() / 2];
  row.forward_rss_mib = rss_growth;
  row.peak_state_bytes = meter.peak_bytes();
  row.peak_state_mib = static_cast<double>(meter.peak_bytes()) / kMiB;
  row.step_state_mib = static_cast<double>(meter.step_bytes()) / kMiB;
  row.optimizer_mib = static_cast<double>(meter.optimizer_bytes()) / kMiB;
  row.hwm_mib = hwm_mib();
  row.peak_tensors_mib = static_cast<double>(CpuAllocator::instance().stats().peak_bytes) / kMiB;
  return row;
}

}  // namespace

std::vector<FsdpBenchRow> run_fsdp_bench(const FsdpBenchOptions& o,
                                         const std::function<void(const std::string&)>& print) {
  BRAID_CHECK_ARG(o.layers >= 1 && o.width >= 1 && o.batch >= 1 && o.steps >= 1 && o.warmup >= 0,
                  "bench fsdp: every size and count must be positive (layers {}, width {}, batch {}, steps {}, "
                  "warmup {})",
                  o.layers, o.width, o.batch, o.steps, o.warmup);
  BRAID_CHECK_ARG(!o.strategies.empty(), "bench fsdp: no strategy to run");
  for (const auto& name : o.strategies) check_strategy(name);

  collectives::InitOptions init;
  init.init_method = o.init_method;
  collectives::init_process_group(o.backend, init);
  const int rank = collectives::get_rank();
  const int ranks = collectives::get_world_size();
  const double unit_mib = static_cast<double>(o.width * o.width + o.width) * 4.0 / 1048576.0;
  const double model_mib = static_cast<double>(o.layers) * unit_mib;
  if (rank == 0) {
    print(fmt::format("# braid bench fsdp: {} ranks, backend {}, {} x Linear({}, {}) (one unit each), batch {} per "
                      "rank, {:.1f} MiB of float32 parameters ({} M), largest unit {:.1f} MiB, optimizer {}, {} timed "
                      "steps after {} warm-up\n",
                      ranks, o.backend, o.layers, o.width, o.width, o.batch, model_mib,
                      static_cast<double>(o.layers * (o.width * o.width + o.width)) / 1e6, unit_mib, o.optimizer,
                      o.steps, o.warmup));
    print("# state: parameters + gradients + optimizer state of one rank (bench/fsdp/fsdp_bench_meter.h); peak over\n"
          "# the step, and at the optimizer step; peak tensors: every tensor's memory at once (CPU allocator, FSDP's\n"
          "# gathered parameters, shared-memory buckets; activations and communication buffers included) at its\n"
          "# peak over the timed steps; VmHWM: the process's peak resident memory\n");
    print(fmt::format("# {:<14} {:>14} {:>20} {:>18} {:>16} {:>14} {:>19} {:>12}\n", "strategy", "step p50 (ms)",
                      "RSS in forward (MiB)", "peak state (MiB)", "at step (MiB)", "optim (MiB)",
                      "peak tensors (MiB)", "VmHWM (MiB)"));
  }
  std::vector<FsdpBenchRow> rows;
  for (const std::string& s : o.strategies) {
    rows.push_back(run_one(o, s));
    const FsdpBenchRow& r = rows.back();
    if (rank == 0) {
      print(fmt::format("  {:<14} {:>14.2f} {:>20.1f} {:>18.1f} {:>16.1f} {:>14.1f} {:>19.1f} {:>12.1f}\n",
                        r.strategy, r.median_ms, r.forward_rss_mib, r.peak_state_mib, r.step_state_mib,
                        r.optimizer_mib, r.peak_tensors_mib, r.hwm_mib));
      print(fmt::format("RESULT fsdp strategy={} ranks={} backend={} layers={} width={} median_ms={:.3f} "
                        "forward_rss_mib={:.1f} peak_state_mib={:.2f} step_state_mib={:.2f} optimizer_mib={:.2f} "
                        "peak_tensors_mib={:.2f} hwm_mib={:.1f} unit_mib={:.2f} model_mib={:.2f} optimizer={} "
                        "peak_state_bytes={} unit_bytes={}\n",
                        r.strategy, ranks, o.backend, o.layers, o.width, r.median_ms, r.forward_rss_mib,
                        r.peak_state_mib, r.step_state_mib, r.optimizer_mib, r.peak_tensors_mib, r.hwm_mib, unit_mib,
                        model_mib, o.optimizer, r.peak_state_bytes, (o.width * o.width + o.width) * 4));
    }
  }
  collectives::destroy_process_group();
  return rows;
}

}  // namespace braid::bench
