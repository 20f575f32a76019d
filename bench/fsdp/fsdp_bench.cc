// fsdp_bench: one training step of an MLP stack under each FSDP strategy, and the memory the gathered
// parameters hold between forward and backward (the point of FULL_SHARD's resharding).
//
//   mpirun -np 2 build/bench/fsdp_bench [backend=gloo] [layers=8] [width=1024] [steps=10]
//
// Prints, per strategy, the median step time (forward + backward + SGD) and the process's resident
// memory right after forward minus before it (VmRSS, rank 0). Each Linear is its own unit, so FULL_SHARD
// holds one layer's full weights at a time during forward while SHARD_GRAD_OP holds all of them until
// backward. A number to read next to the model size printed first, not a pass/fail test.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops/nn_ops.h"
#include "collectives/backends/world.h"
#include "nn/container.h"
#include "nn/optim/sgd.h"
#include "parallel/fsdp/fully_shard.h"
#include "tensor/factory.h"
#include "tensor/random.h"

using namespace braid;
namespace fsdp = braid::parallel::fsdp;

namespace {

// Resident memory of this process in MiB (VmRSS of /proc/self/status).
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

struct Result {
  double median_ms;
  double forward_rss_mib;
};

Result run(fsdp::ShardingStrategy strategy, int layers, int64_t width, int steps) {
  auto group = collectives::default_group();
  std::vector<int64_t> sizes(static_cast<size_t>(layers) + 1, width);
  Generator gen(1);
  auto model = std::make_shared<nn::MLP>(sizes, true, &gen);
  fsdp::FSDPOptions o;
  o.strategy = strategy;
  fsdp::apply_fully_shard(*model, group, o, fsdp::module_type_policy({"Linear"}));
  nn::optim::SGD opt(model->parameters(), {.lr = 1e-3});
  const Tensor x = rand({16, width}, {}, &gen);
  const Tensor y = rand({16, width}, {}, &gen);
  std::vector<double> times;
  double rss_delta = 0;
  for (int step = 0; step < steps + 2; ++step) {  // two warm-up steps allocate every buffer
    group->barrier()->wait();
    const auto start = std::chrono::steady_clock::now();
    const double before = rss_mib();
    const Tensor loss = autograd::mse_loss((*model)(x), y);
    if (step >= 2) rss_delta = std::max(rss_delta, rss_mib() - before);
    autograd::backward(loss);
    opt.step();
    opt.zero_grad();
    const auto end = std::chrono::steady_clock::now();
    if (step >= 2) times.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], rss_delta};
}

}  // namespace

int main(int argc, char** argv) {
  const std::string backend = argc > 1 ? argv[1] : "gloo";
  const int layers = argc > 2 ? std::atoi(argv[2]) : 8;
  const int64_t width = argc > 3 ? std::atoll(argv[3]) : 1024;
  const int steps = argc > 4 ? std::atoi(argv[4]) : 10;
  collectives::init_process_group(backend);
  const int rank = collectives::get_rank();
  const double model_mib = static_cast<double>(layers) * static_cast<double>(width * width + width) * 4 / 1048576;
  if (rank == 0) {
    fmt::print("# fsdp_bench: {} ranks, {}, MLP of {} Linear({}, {}), {:.1f} MiB of float32 parameters\n",
               collectives::get_world_size(), backend, layers, width, width, model_mib);
    fmt::print("# {:<14} {:>12} {:>22}\n", "strategy", "step (ms)", "RSS after forward (MiB)");
  }
  using S = fsdp::ShardingStrategy;
  for (S s : {S::FULL_SHARD, S::SHARD_GRAD_OP, S::NO_SHARD}) {
    const Result r = run(s, layers, width, steps);
    if (rank == 0) fmt::print("  {:<14} {:>12.2f} {:>22.1f}\n", fsdp::to_string(s), r.median_ms, r.forward_rss_mib);
  }
  collectives::destroy_process_group();
  return 0;
}
