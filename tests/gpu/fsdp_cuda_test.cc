// FSDP on CUDA parameters over a one-rank NCCL group (issue 8: "No GPU run yet"). Three blocks (elementwise,
// then Linear), each its own unit, under a root unit; every strategy that needs no second
// group, with prefetching on. With one rank the shards are the whole parameters, but every collective of
// a step still runs through NCCL on the GPU (all-gather before forward and backward, reduce-scatter of
// the gradients, allreduce for NO_SHARD) and the gathered parameters live in plain device allocations
// rather than the CPU's releasable mapping; with offload_params the shards and gradients stay in host memory
// and the optimizer steps there. Three SGD steps must give the losses, gradients and
// parameters of the same model trained without FSDP on the GPU, with clip_grad_norm_ in the second step.
// Skips, saying so, without a GPU.
#include <catch2/catch.hpp>

#include "base/config.h"

#if BRAID_HAVE_NCCL

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/variable.h"
#include "nn/optim/sgd.h"
#include "parallel/fsdp/clip_grad_norm.h"
#include "parallel/fsdp/fully_shard.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/random.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid {
namespace {

namespace fsdp = parallel::fsdp;

// relu(x * w + b) (elementwise), or relu(linear(x, w, b)) with a [width, width] w (a cuBLAS product in
// forward and two in backward). The width is odd so that a wider group would have to pad.
class Block : public nn::Module {
 public:
  Block(int64_t width, bool linear, Generator& gen) : nn::Module("Block"), linear_(linear) {
    w = register_parameter("w", mul(randn(linear ? Shape{width, width} : Shape{width}, {}, &gen), 0.3));
    b = register_parameter("b", randn({width}, {}, &gen));
  }
  Tensor forward(const Tensor& x) override {
    return autograd::relu(linear_ ? autograd::linear(x, w, b) : autograd::add(autograd::mul(x, w), b));
  }
  Tensor w, b;

 private:
  bool linear_;
};

class Stack : public nn::Module {
 public:
  Stack(uint64_t seed, bool linear) : nn::Module("Stack") {
    Generator gen(seed);
    for (int i = 0; i < 3; ++i) {
      blocks.push_back(std::make_shared<Block>(kWidth, linear, gen));
      register_module("block" + std::to_string(i), blocks.back());
    }
    scale = register_parameter("scale", randn({kWidth}, {}, &gen));  // the root unit's own parameter
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (auto& b : blocks) h = (*b)(h);
    return autograd::mul(h, scale);
  }
  static constexpr int64_t kWidth = 13;
  std::vector<std::shared_ptr<Block>> blocks;
  Tensor scale;
};

struct StrategyCase {
  const char* name;
  fsdp::ShardingStrategy strategy;
  std::optional<bool> reshard_after_forward;
  bool offload = false;
};

TEST_CASE("fsdp: CUDA units over NCCL train like the unsharded model", "[gpu][fsdp]") {
  if (gpu_test::no_gpu()) return;
  const StrategyCase cases[] = {
      {"FULL_SHARD", fsdp::ShardingStrategy::FULL_SHARD, std::nullopt},
      {"FULL_SHARD, no reshard after forward", fsdp::ShardingStrategy::FULL_SHARD, false},
      {"SHARD_GRAD_OP", fsdp::ShardingStrategy::SHARD_GRAD_OP, std::nullopt},
      {"NO_SHARD", fsdp::ShardingStrategy::NO_SHARD, std::nullopt},
      {"FULL_SHARD, offload_params", fsdp::ShardingStrategy::FULL_SHARD, std::nullopt, true},
      {"SHARD_GRAD_OP, offload_params", fsdp::ShardingStrategy::SHARD_GRAD_OP, std::nullopt, true},
  };
  for (const bool linear : {false, true}) {
    for (const StrategyCase& c : cases) {
      INFO(c.name << (linear ? ", Linear blocks" : ", elementwise blocks"));
      const Device gpu = Device::cuda(0);
      auto reference = std::make_shared<Stack>(3, linear);
      auto sharded = std::make_shared<Stack>(3, linear);
      reference->to(gpu);
      sharded->to(gpu);
      auto group = gpu_test::one_rank_nccl_group(std::string("fsdp-gpu-") + c.name + (linear ? "-linear" : ""));
      fsdp::FSDPOptions o;
      o.strategy = c.strategy;
      o.reshard_after_forward = c.reshard_after_forward;
      o.offload_params = c.offload;
      o.forward_prefetch = true;
      o.backward_prefetch = true;
      for (auto& b : sharded->blocks) fsdp::fully_shard(*b, group, o);
      fsdp::fully_shard(*sharded, group, o);
      const uint64_t seq_before = group->sequence_number();

      nn::optim::SGD ref_opt(reference->parameters(), {.lr = 0.05});
      nn::optim::SGD opt(sharded->parameters(), {.lr = 0.05});
      for (int step = 0; step < 3; ++step) {
        INFO("step " << step);
        Generator gen(200 + static_cast<uint64_t>(step));
        const Tensor input = randn({6, Stack::kWidth}, {}, &gen).to(gpu);
        const Tensor target = randn({6, Stack::kWidth}, {}, &gen).to(gpu);
        const Tensor ref_loss = autograd::mse_loss((*reference)(input), target);
        const Tensor loss = autograd::mse_loss((*sharded)(input), target);
        REQUIRE(loss.is_cuda());
        CHECK(allclose(loss.cpu(), ref_loss.cpu(), 1e-6, 1e-7));
        autograd::backward(ref_loss);
        autograd::backward(loss);
        const auto ref_params = reference->named_parameters();
        const auto params = sharded->named_parameters();
        REQUIRE(params.size() == ref_params.size());
        if (step == 1) {
          // clip_grad_norm_'s norm crosses the group too (an allreduce of a GPU scalar on NCCL); the
          // reference clips by hand with the same rule.
          double sum_sq = 0;
          for (const auto& [name, p] : ref_params) {
            const Tensor g = autograd::grad(p).cpu().to(DType::Float64);
            for (int64_t k = 0; k < g.numel(); ++k) sum_sq += g.data<double>()[k] * g.data<double>()[k];
          }
          const double ref_norm = std::sqrt(sum_sq);
          const double max_norm = ref_norm / 2;  // so that clipping happens
          const double norm = fsdp::clip_grad_norm_(*sharded, max_norm);
          CHECK(norm == Approx(ref_norm).epsilon(1e-9));
          const double coef = max_norm / (ref_norm + 1e-6);
          for (const auto& [name, p] : ref_params) {
            Tensor g = autograd::grad(p);
            g.mul_(Scalar(coef));
          }
        }
        for (size_t i = 0; i < params.size(); ++i) {
          INFO(params[i].first);
          const Tensor grad = autograd::grad(params[i].second);
          REQUIRE(grad.defined());
          // Offloaded: the shards and their gradients are in host memory between uses.
          CHECK(grad.is_cuda() == !c.offload);
          CHECK(params[i].second.is_cuda() == !c.offload);
          CHECK(allclose(grad.cpu(), autograd::grad(ref_params[i].second).cpu(), 1e-5, 1e-6));
        }
        ref_opt.step();
        opt.step();
        ref_opt.zero_grad();
        opt.zero_grad();
        for (size_t i = 0; i < params.size(); ++i) {
          INFO(params[i].first);
          CHECK(allclose(params[i].second.cpu(), ref_params[i].second.cpu(), 1e-5, 1e-6));
        }
      }
      // The steps communicated on the GPU group: gathers and reductions, not a local shortcut.
      CHECK(group->sequence_number() > seq_before);
    }
  }
}

}  // namespace
}  // namespace braid

#endif  // BRAID_HAVE_NCCL
