// DDP's mixed_precision.param_dtype: the forward and backward run on low-precision copies of the
// parameters, the parameters keep their full-precision values and get full-precision gradients. Checked
// against a single process on the concatenated batch computed in the same precision (float64 exactly
// enough to compare at 1e-6; bfloat16 within its rounding), and the full-precision values survive.
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/shape.h"
#include "autograd/variable.h"
#include "parallel/ddp/ddp.h"
#include "tensor/compare.h"
#include "tests/mp/parallel/ddp_models.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using parallel::DDPOptions;
using parallel::DistributedDataParallel;

namespace {

constexpr int64_t kLocalBatch = 2;

// p -= 0.5 * grad; grad = None.
void half_sgd_step(nn::Module& m) {
  autograd::NoGradGuard no_grad;
  for (const auto& p : m.parameters()) {
    const Tensor g = autograd::grad(p);
    if (g.defined()) p.sub_(mul(g, 0.5));
  }
  m.zero_grad();
}

// ParityNet that notes the dtype of fc1's weight while its forward runs.
class ProbedNet : public ParityNet {
 public:
  explicit ProbedNet(uint64_t seed) : ParityNet(seed) {}
  Tensor forward(const Tensor& x) override {
    seen = fc1->weight().dtype();
    return ParityNet::forward(x);
  }
  DType seen = DType::Bool;
};

}  // namespace

TEST_CASE_METHOD(MpFixture, "ddp: param_dtype float64 on a float32 model equals a float64 single process", "[ddp]") {
  const int ws = size(), r = rank();
  auto reference = std::make_shared<ParityNet>(7);
  reference->to(DType::Float64);
  auto local = std::make_shared<ProbedNet>(7);
  DDPOptions o;
  o.process_group = shared_group();
  o.bucket_cap_mb = 0.001;
  o.mixed_precision.param_dtype = DType::Float64;
  DistributedDataParallel ddp(local, o);
  for (int it = 0; it < 3; ++it) {
    INFO("iteration " << it);
    Generator gen(99 + static_cast<uint64_t>(it));
    const Tensor input = rand({ws * kLocalBatch, 2}, {}, &gen);
    const Tensor target = rand({ws * kLocalBatch, 4}, {}, &gen);
    autograd::backward(autograd::mse_loss(reference->forward(input.to(DType::Float64)), target.to(DType::Float64)));
    const Tensor mine = input.slice(0, r * kLocalBatch, (r + 1) * kLocalBatch);
    const Tensor out = ddp.forward(mine);
    CHECK(local->seen == DType::Float64);
    CHECK(out.dtype() == DType::Float64);
    autograd::backward(autograd::mse_loss(out, target.slice(0, r * kLocalBatch, (r + 1) * kLocalBatch).to(DType::Float64)));
    const auto want = reference->named_parameters();
    const auto got = local->named_parameters();
    for (size_t i = 0; i < want.size(); ++i) {
      INFO(want[i].first);
      CHECK(got[i].second.dtype() == DType::Float32);
      const Tensor g = autograd::grad(got[i].second);
      REQUIRE(g.defined());
      CHECK(g.dtype() == DType::Float32);
      CHECK(allclose(g, autograd::grad(want[i].second).to(DType::Float32), 1e-5, 1e-7));
    }
    half_sgd_step(*reference);
    half_sgd_step(*local);
    for (size_t i = 0; i < want.size(); ++i) {
      CHECK(allclose(got[i].second, want[i].second.to(DType::Float32), 1e-6, 1e-7));
    }
  }
}

TEST_CASE_METHOD(MpFixture, "ddp: param_dtype bfloat16 computes in bfloat16 and keeps the float32 values", "[ddp]") {
  const int ws = size(), r = rank();
  auto reference = std::make_shared<ParityNet>(11);
  auto local = std::make_shared<ProbedNet>(11);
  {
    // Values bfloat16 cannot hold (8 significant bits): a round trip through it would change them.
    autograd::NoGradGuard no_grad;
    for (ParityNet* net : {static_cast<ParityNet*>(reference.get()), static_cast<ParityNet*>(local.get())}) {
      net->fc1->weight().add_(1.0 / 4096);
    }
  }
  const Tensor fc1_before = local->fc1->weight().clone();
  DDPOptions o;
  o.process_group = shared_group();
  o.mixed_precision.param_dtype = DType::BFloat16;
  o.mixed_precision.reduce_dtype = DType::Float32;
  DistributedDataParallel ddp(local, o);
  Generator gen(5);
  const Tensor input = rand({ws * kLocalBatch, 2}, {}, &gen);
  const Tensor target = rand({ws * kLocalBatch, 4}, {}, &gen);
  autograd::backward(autograd::mse_loss(reference->forward(input), target));
  const Tensor out = ddp.forward(input.slice(0, r * kLocalBatch, (r + 1) * kLocalBatch));
  CHECK(local->seen == DType::BFloat16);
  CHECK(out.dtype() == DType::BFloat16);
  autograd::backward(autograd::mse_loss(autograd::to(out, DType::Float32), target.slice(0, r * kLocalBatch, (r + 1) * kLocalBatch)));
  // After the backward: float32 parameters with exactly their old values, float32 gradients close to the
  // float32 reference (a forward and backward in bfloat16 round at 2^-8 relative per step).
  CHECK(local->fc1->weight().dtype() == DType::Float32);
  CHECK(equal(local->fc1->weight(), fc1_before));
  const auto want = reference->named_parameters();
  const auto got = local->named_parameters();
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(want[i].first);
    const Tensor g = autograd::grad(got[i].second);
    REQUIRE(g.defined());
    CHECK(g.dtype() == DType::Float32);
    CHECK(allclose(g, autograd::grad(want[i].second), 5e-2, 2e-3));
  }
}

TEST_CASE_METHOD(MpFixture, "ddp: param_dtype restores the parameters after no_grad forwards and under no_sync",
                 "[ddp]") {
  auto local = std::make_shared<ParityNet>(3);
  DDPOptions o;
  o.process_group = shared_group();
  o.mixed_precision.param_dtype = DType::Float16;
  DistributedDataParallel ddp(local, o);
  const Tensor x = rand({kLocalBatch, 2});
  {
    autograd::NoGradGuard no_grad;
    const Tensor y = ddp.forward(x);
    CHECK(y.dtype() == DType::Float16);
  }
  CHECK(local->fc2->weight().dtype() == DType::Float32);
  {
    auto guard = ddp.no_sync();
    autograd::backward(autograd::sum(autograd::to(ddp.forward(x), DType::Float32)));
  }
  CHECK(local->fc2->weight().dtype() == DType::Float32);
  CHECK(autograd::grad(local->fc2->weight()).dtype() == DType::Float32);
  // The synced step adds its gradient to the one no_sync accumulated (in float32) and reduces the sum.
  autograd::backward(autograd::sum(autograd::to(ddp.forward(x), DType::Float32)));
  CHECK(local->fc2->weight().dtype() == DType::Float32);
  CHECK(autograd::grad(local->fc2->weight()).dtype() == DType::Float32);
  // A bad dtype is refused at construction.
  auto other = std::make_shared<ParityNet>(3);
  DDPOptions bad = o;
  bad.mixed_precision.param_dtype = DType::Int32;
  CHECK_THROWS_WITH(DistributedDataParallel(other, bad), Catch::Contains("param_dtype must be floating"));
}
