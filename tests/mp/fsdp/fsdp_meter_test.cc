// The accounting behind `braid bench fsdp`'s memory columns (bench/fsdp/fsdp_bench_meter.h), worked out by
// hand for three Linear(16, 16) units with Adam: unsharded, the state is 4 P (parameters, gradients, two
// Adam tensors); under FULL_SHARD on W ranks it is 4 P / W at the optimizer step, and the peak comes when
// the first Linear's reduction node has reduced its full gradients into shards, besides the other units'
// gradient shards.
// Its parameters are not gathered then: its input needs no gradient, so backward never reads its weight;
// the later Linears give theirs back before their weight gradients are computed.
#include <memory>

#include "autograd/engine.h"
#include "autograd/ops/nn_ops.h"
#include "bench/fsdp/fsdp_bench_meter.h"
#include "nn/container.h"
#include "nn/optim/adam.h"
#include "parallel/fsdp/fully_shard.h"
#include "tensor/factory.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
namespace fsdp = braid::parallel::fsdp;

namespace {

constexpr int64_t kUnit = (16 * 16 + 16) * 4;  // one Linear(16, 16), float32
constexpr int64_t kModel = 3 * kUnit;
constexpr int64_t kSteps = 6 * 4;  // Adam's "step" of each of the six parameters: a 0-dim float32 tensor

// Two Adam steps (the first creates the state), the peak of the second.
bench::StateMeter& train(bench::StateMeter& meter, nn::Module& model) {
  nn::optim::Adam opt(model.parameters());
  const Tensor x = ones({4, 16});
  for (int step = 0; step < 2; ++step) {
    if (step == 1) meter.reset_peak();
    autograd::backward(autograd::mse_loss(model(x), zeros({4, 16})));
    opt.step();
    meter.after_step(opt);
    opt.zero_grad();
  }
  return meter;
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "fsdp bench meter: parameters, gradients and optimizer state by hand", "[fsdp]") {
  const int64_t w = size();
  REQUIRE(16 % w == 0);  // no padding: a shard is exactly 1 / W of its parameter
  Generator gen(3);
  SECTION("unsharded") {
    nn::MLP model({16, 16, 16, 16}, true, &gen);
    bench::StateMeter meter(model);
    train(meter, model);
    CHECK(meter.optimizer_bytes() == 2 * kModel + kSteps);
    CHECK(meter.step_bytes() == 4 * kModel + kSteps);
    CHECK(meter.peak_bytes() == 4 * kModel + kSteps);
  }
  SECTION("FULL_SHARD") {
    nn::MLP model({16, 16, 16, 16}, true, &gen);
    fsdp::apply_fully_shard(model, shared_group(), {}, fsdp::module_type_policy({"Linear"}));
    bench::StateMeter meter(model);
    train(meter, model);
    CHECK(meter.optimizer_bytes() == 2 * kModel / w + kSteps);
    CHECK(meter.step_bytes() == 4 * kModel / w + kSteps);
    // First Linear's reduction: parameter shards, two units' gradient shards, Adam, its full gradients
    // and the shard gradients reduced from them.
    CHECK(meter.peak_bytes() == kModel / w + 2 * kUnit / w + 2 * kModel / w + kSteps + kUnit + kUnit / w);
    // FULL_SHARD's target, 1/N of the unsharded state plus the largest unit, but for Adam's 0-dim step
    // counters: one per parameter on every rank, not sharded.
    CHECK(meter.peak_bytes() == (4 * kModel + kSteps) / w + kUnit + kSteps * (w - 1) / w);
  }
}
