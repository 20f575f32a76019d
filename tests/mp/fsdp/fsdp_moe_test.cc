// FSDP parity on the MixtureOfExperts of torch's common_fsdp.py (mixture_of_experts.h): the expert is a unit
// over a one-rank group of its own, `shared` a unit over the whole group, the root holds the rest.
//
// What parity means in common_fsdp: the reference is the unwrapped model on every rank (DummyDDP: no
// synchronisation of its own) whose run_backward averages the gradient of every non-expert parameter over
// the ranks with an allreduce and leaves the experts' alone. Here one process computes that reference for
// all ranks at once: one replica per rank (expert seed 42 + r), each on that rank's input, the non-expert
// gradients replaced by their mean over the replicas. After every step rank r's FSDP model must match
// replica r: its loss (common_fsdp's output.sum() on its own batch), its shards of the shared parameters and
// gradients, its own expert's full parameters and gradient, and the gathered parameters after SGD.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "collectives/registry/group_registry.h"
#include "nn/optim/sgd.h"
#include "parallel/fsdp/fully_shard.h"
#include "parallel/fsdp/unit_registry.h"
#include "tensor/compare.h"
#include "tensor/ops/elementwise.h"
#include "tests/mp/fsdp/fsdp_parity_util.h"
#include "tests/mp/fsdp/mixture_of_experts.h"
#include "tests/mp/support/default_group.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
namespace fsdp = braid::parallel::fsdp;
namespace coll = braid::collectives;

namespace {

constexpr int kSteps = 3;
constexpr double kLr = 0.01;  // common_fsdp's _train_for_several_steps

// Rank r's batch in a step: common_fsdp's get_input (rand(4, 8) from seed 1 + rank), varied per step.
Tensor input_of(int rank, int step) {
  Generator gen(1 + static_cast<uint64_t>(rank) + 1000 * static_cast<uint64_t>(step));
  return rand({4, MixtureOfExperts::kInput}, {}, &gen);
}

// The sums in a reduction run in another order than the reference's: allow rtol of the largest element.
bool close(const Tensor& got, const Tensor& want) {
  double largest = 0.0;
  for (double v : to_vector<double>(want.to(DType::Float64))) largest = std::max(largest, std::abs(v));
  return allclose(got, want, kRtol, kAtol + kRtol * largest);
}

// common_fsdp's reference for every rank at once (see the top of the file).
class Reference {
 public:
  explicit Reference(int world) {
    for (int r = 0; r < world; ++r) {
      replicas_.push_back(std::make_shared<MixtureOfExperts>(r));
      optimizers_.push_back(std::make_unique<nn::optim::SGD>(replicas_.back()->parameters(),
                                                             nn::optim::SGDOptions{.lr = kLr}));
    }
  }
  // Forward and backward of every replica on its rank's input, then the non-expert averaging; returns
  // the losses.
  std::vector<double> forward_backward(int step) {
    std::vector<double> losses;
    for (size_t r = 0; r < replicas_.size(); ++r) {
      const Tensor loss = autograd::sum((*replicas_[r])(input_of(static_cast<int>(r), step)));
      autograd::backward(loss);
      losses.push_back(loss.item<double>());
    }
    const size_t n = replicas_[0]->parameters().size();
    for (size_t i = 0; i < n; ++i) {
      if (replicas_[0]->is_expert(replicas_[0]->parameters()[i])) continue;
      Tensor total = zeros_like(autograd::grad(replicas_[0]->parameters()[i]));
      for (auto& m : replicas_) total = add(total, autograd::grad(m->parameters()[i]));
      const Tensor mean = mul(total, Scalar(1.0 / static_cast<double>(replicas_.size())));
      for (auto& m : replicas_) autograd::set_grad(m->parameters()[i], mean.clone());
    }
    return losses;
  }
  void step() {
    for (auto& opt : optimizers_) {
      opt->step();
      opt->zero_grad();
    }
  }
  MixtureOfExperts& replica(int r) { return *replicas_[static_cast<size_t>(r)]; }

 private:
  std::vector<std::shared_ptr<MixtureOfExperts>> replicas_;
  std::vector<std::unique_ptr<nn::optim::SGD>> optimizers_;
};

void check_moe_parity(MpFixture& f, const fsdp::FSDPOptions& options, int delay_before_free_ms = 0) {
  const int ws = f.size(), r = f.rank();
  auto group = f.shared_group();
  Reference reference(ws);

  auto model = std::make_shared<MixtureOfExperts>(r, delay_before_free_ms);
  // Every rank creates its own one-rank group (no other rank takes part: see collectives/registry/group_registry.h).
  auto expert_group = coll::new_group({r});
  auto expert_unit = fsdp::fully_shard(*model->expert, expert_group, options);
  fsdp::fully_shard(*model->shared, group, options);
  fsdp::fully_shard(*model, group, options);
  CHECK(expert_unit->group()->size() == 1);
  CHECK(fsdp::unit_of_parameter(model->expert->weight()) == expert_unit);
  nn::optim::SGD opt(model->parameters(), {.lr = kLr});
  const bool sharded = options.strategy != fsdp::ShardingStrategy::NO_SHARD;

  for (int step = 0; step < kSteps; ++step) {
    INFO("step " << step);
    const std::vector<double> ref_losses = reference.forward_backward(step);
    const Tensor loss = autograd::sum((*model)(input_of(r, step)));
    autograd::backward(loss);
    CHECK(std::abs(loss.item<double>() - ref_losses[static_cast<size_t>(r)]) <=
          kRtol * std::abs(ref_losses[static_cast<size_t>(r)]) + kAtol);

    MixtureOfExperts& mine = reference.replica(r);
    const auto ref_params = mine.named_parameters();
    const auto params = model->named_parameters();
    REQUIRE(params.size() == ref_params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      INFO(params[i].first);
      CHECK(params[i].first == ref_params[i].first);
      const Tensor& p = params[i].second;
      const Tensor& ref = ref_params[i].second;
      // The expert's group has one rank: its one shard is the whole parameter, and its own.
      const bool expert = model->is_expert(p);
      CHECK(expert == mine.is_expert(ref));
      const bool cut = sharded && !expert;
      CHECK(close(p, cut ? expected_shard(ref, r, ws) : ref));
      const Tensor g = autograd::grad(p);
      REQUIRE(g.defined());
      CHECK(close(g, cut ? expected_shard(autograd::grad(ref), r, ws) : autograd::grad(ref)));
    }
    reference.step();
    opt.step();
    opt.zero_grad();

    with_full_parameters(*model, [&] {
      const auto full = model->named_parameters();
      for (size_t i = 0; i < full.size(); ++i) {
        INFO(full[i].first);
        CHECK(close(full[i].second, ref_params[i].second));
      }
    });
  }
  // The experts really differ between ranks (else the test would not tell the groups apart).
  CHECK_FALSE(allclose(reference.replica(0).expert->weight(), reference.replica(ws - 1).expert->weight()));
}

fsdp::FSDPOptions strategy(fsdp::ShardingStrategy s, std::optional<bool> reshard = std::nullopt) {
  fsdp::FSDPOptions o;
  o.strategy = s;
  o.reshard_after_forward = reshard;
  return o;
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "fsdp moe: experts on one-rank groups train like common_fsdp's reference", "[fsdp]") {
  DefaultGroupScope world(*this);  // new_group needs the default group
  using S = fsdp::ShardingStrategy;
  SECTION("FULL_SHARD") { check_moe_parity(*this, strategy(S::FULL_SHARD)); }
  SECTION("SHARD_GRAD_OP") { check_moe_parity(*this, strategy(S::SHARD_GRAD_OP)); }
  SECTION("FULL_SHARD, reshard_after_forward=false") { check_moe_parity(*this, strategy(S::FULL_SHARD, false)); }
  SECTION("NO_SHARD") { check_moe_parity(*this, strategy(S::NO_SHARD)); }
  SECTION("FULL_SHARD, forward and backward prefetch") {
    fsdp::FSDPOptions o = strategy(S::FULL_SHARD);
    o.forward_prefetch = true;
    o.backward_prefetch = true;
    check_moe_parity(*this, o);
  }
  SECTION("FULL_SHARD, delay before freeing the expert") {
    check_moe_parity(*this, strategy(S::FULL_SHARD), /*delay_before_free_ms=*/5);
  }
}
