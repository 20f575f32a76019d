// Optimizers on shards and clip_grad_norm_ across shards: Adam/AdamW built on the sharded parameters keep
// sharded state and train like the reference; clip_grad_norm_ returns the norm of the whole gradient and
// clips like torch.nn.utils.clip_grad_norm_ on the unsharded model. Plus gradient accumulation over two
// backwards and frozen parameters.
#include <cmath>

#include "autograd/engine.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/variable.h"
#include "nn/optim/adam.h"
#include "parallel/fsdp/clip_grad_norm.h"
#include "parallel/fsdp/fully_shard.h"
#include "tensor/compare.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"
#include "tests/mp/fsdp/fsdp_models.h"
#include "tests/mp/fsdp/fsdp_parity_util.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
namespace fsdp = braid::parallel::fsdp;

namespace {

// One step's batch: the whole of it for the reference, this rank's rows for the sharded model.
struct Batch {
  Tensor input, target;
};
Batch batch(int step, int ws) {
  Generator gen(77 + static_cast<uint64_t>(step));
  Batch b;
  b.input = rand({ws * 2, 8}, {}, &gen);
  b.target = rand({ws * 2, 8}, {}, &gen);
  return b;
}
Batch mine(const Batch& b, int rank) { return {b.input.narrow(0, rank * 2, 2), b.target.narrow(0, rank * 2, 2)}; }

void backward_on(nn::Module& model, const Batch& b) {
  autograd::backward(autograd::mse_loss(model(b.input), b.target));
}

// The reference: torch.nn.utils.clip_grad_norm_ on the unsharded gradients.
double clip_reference(nn::Module& model, double max_norm) {
  double sq = 0;
  for (const Tensor& p : model.parameters()) {
    const Tensor g = autograd::grad(p);
    sq += sum(mul(g.to(DType::Float64), g.to(DType::Float64))).item<double>();
  }
  const double norm = std::sqrt(sq);
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1) {
    for (const Tensor& p : model.parameters()) autograd::grad(p).mul_(Scalar(coef));
  }
  return norm;
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "fsdp: Adam and AdamW on shards keep sharded state and match the reference", "[fsdp]") {
  const int ws = size(), r = rank();
  for (bool decoupled : {false, true}) {
    INFO((decoupled ? "AdamW" : "Adam"));
    auto reference = make_mlp(5);
    auto sharded = make_mlp(5);
    fsdp::apply_fully_shard(*sharded, shared_group(), {}, fsdp::module_type_policy({"Linear"}));
    std::unique_ptr<nn::optim::Optimizer> ref_opt, opt;
    if (decoupled) {
      ref_opt = std::make_unique<nn::optim::AdamW>(reference->parameters(), nn::optim::AdamWOptions{.lr = 0.01});
      opt = std::make_unique<nn::optim::AdamW>(sharded->parameters(), nn::optim::AdamWOptions{.lr = 0.01});
    } else {
      ref_opt = std::make_unique<nn::optim::Adam>(reference->parameters(), nn::optim::AdamOptions{.lr = 0.01});
      opt = std::make_unique<nn::optim::Adam>(sharded->parameters(), nn::optim::AdamOptions{.lr = 0.01});
    }
    for (int step = 0; step < 3; ++step) {
      const Batch b = batch(step, ws);
      backward_on(*reference, b);
      backward_on(*sharded, mine(b, r));
      ref_opt->step();
      opt->step();
      ref_opt->zero_grad();
      opt->zero_grad();
    }
    const auto ref_params = reference->parameters();
    const auto params = sharded->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      INFO("parameter " << i);
      CHECK(allclose(params[i], expected_shard(ref_params[i], r, ws), kRtol, kAtol));
      // The optimizer state is as sharded as the parameter.
      CHECK(opt->state(i).at("exp_avg").shape() == params[i].shape());
      CHECK(allclose(opt->state(i).at("exp_avg_sq"), expected_shard(ref_opt->state(i).at("exp_avg_sq"), r, ws), kRtol, 1e-9));
    }
  }
}

TEST_CASE_METHOD(MpFixture, "fsdp: clip_grad_norm_ uses the norm of the whole gradient", "[fsdp]") {
  const int ws = size(), r = rank();
  using S = fsdp::ShardingStrategy;
  for (S s : {S::FULL_SHARD, S::NO_SHARD}) {
    for (double max_norm : {1e-3, 1e3}) {  // clips, and leaves alone
      INFO(fsdp::to_string(s) << " max_norm " << max_norm);
      auto reference = make_mlp(9);
      auto sharded = make_mlp(9);
      fsdp::FSDPOptions o;
      o.strategy = s;
      fsdp::apply_fully_shard(*sharded, shared_group(), o, fsdp::size_based_policy(100));
      const Batch b = batch(0, ws);
      backward_on(*reference, b);
      backward_on(*sharded, mine(b, r));
      const double want = clip_reference(*reference, max_norm);
      const double got = fsdp::clip_grad_norm_(*sharded, max_norm);
      CHECK(std::abs(got - want) <= 1e-6 * want);
      const auto ref_params = reference->parameters();
      const auto params = sharded->parameters();
      for (size_t i = 0; i < params.size(); ++i) {
        const Tensor ref_g = autograd::grad(ref_params[i]);
        CHECK(allclose(autograd::grad(params[i]), s == S::NO_SHARD ? ref_g : expected_shard(ref_g, r, ws), kRtol, 1e-9));
      }
    }
  }
}

TEST_CASE_METHOD(MpFixture, "fsdp: gradients accumulate over two backwards; frozen parameters get none", "[fsdp]") {
  const int ws = size(), r = rank();
  auto reference = make_mlp(3);
  auto sharded = make_mlp(3);
  // Freeze the first Linear's bias in both before sharding.
  autograd::set_requires_grad(reference->named_parameters()[1].second, false);
  autograd::set_requires_grad(sharded->named_parameters()[1].second, false);
  fsdp::fully_shard(*sharded, shared_group());
  for (int step = 0; step < 2; ++step) {  // no zero_grad in between
    const Batch b = batch(step, ws);
    backward_on(*reference, b);
    backward_on(*sharded, mine(b, r));
  }
  const auto ref_params = reference->named_parameters();
  const auto params = sharded->named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    INFO(params[i].first);
    const Tensor g = autograd::grad(params[i].second);
    if (i == 1) {
      CHECK_FALSE(g.defined());
      CHECK(equal(params[i].second, expected_shard(ref_params[i].second, r, ws)));
      continue;
    }
    REQUIRE(g.defined());
    CHECK(allclose(g, expected_shard(autograd::grad(ref_params[i].second), r, ws), kRtol, kAtol));
  }
}

namespace {

// A module registering a tensor it is given: two of them given one tensor hold a tied weight (common_fsdp's
// TransformerWithSharedParams ties its embedding and output projection this way).
class Holder : public nn::Module {
 public:
  explicit Holder(const Tensor& t) : nn::Module("Holder") { w = register_parameter("w", t); }
  Tensor forward(const Tensor& x) override { return autograd::linear(x, w); }
  Tensor w;
};

// in -> tied -> block -> relu -> block (the same module again) -> tied -> out.
class TiedAndReused : public nn::Module {
 public:
  explicit TiedAndReused(uint64_t seed) : nn::Module("TiedAndReused") {
    Generator gen(seed);
    const Tensor shared = rand({8, 8}, {}, &gen);
    first = register_module("first", std::make_shared<Holder>(shared));
    block = register_module("block", std::make_shared<nn::Linear>(8, 8, true, &gen));
    last = register_module("last", std::make_shared<Holder>(shared));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = (*block)((*first)(x));
    h = (*block)(autograd::relu(h));
    return (*last)(h);
  }
  std::shared_ptr<Holder> first, last;
  std::shared_ptr<nn::Linear> block;
};

}  // namespace

TEST_CASE_METHOD(MpFixture, "fsdp: a tied weight in the root's unit and a block run twice per forward", "[fsdp]") {
  const int ws = size(), r = rank();
  using S = fsdp::ShardingStrategy;
  for (S s : {S::FULL_SHARD, S::SHARD_GRAD_OP}) {
    INFO(fsdp::to_string(s));
    auto reference = std::make_shared<TiedAndReused>(4);
    auto sharded = std::make_shared<TiedAndReused>(4);
    fsdp::FSDPOptions o;
    o.strategy = s;
    fsdp::fully_shard(*sharded->block, shared_group(), o);
    fsdp::fully_shard(*sharded, shared_group(), o);  // takes the tied weight once
    REQUIRE(sharded->parameters().size() == 3);
    CHECK(sharded->first->w.is_same(sharded->last->w));
    for (int step = 0; step < 2; ++step) {
      const Batch b = batch(step, ws);
      backward_on(*reference, b);
      backward_on(*sharded, mine(b, r));
      const auto ref_params = reference->named_parameters();
      const auto params = sharded->named_parameters();
      for (size_t i = 0; i < params.size(); ++i) {
        INFO(params[i].first << " step " << step);
        CHECK(allclose(autograd::grad(params[i].second), expected_shard(autograd::grad(ref_params[i].second), r, ws),
                       kRtol, kAtol));
      }
      reference->zero_grad();
      sharded->zero_grad();
    }
  }
}
