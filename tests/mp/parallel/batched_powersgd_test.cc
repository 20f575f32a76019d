// batched_powersgd_hook (PyTorch's batched_powerSGD_hook) on buckets built by hand: plain averages before
// start_powersgd_iter; at rank >= the padded square's side the approximation is exact (the average), from
// any bucket size (62 elements: side 8, two zeros of padding); at rank 1 the result, as the padded
// square, has rank 1 and is equal on every rank; the errors of error feedback cancel over the ranks; and
// through register_comm_hook on a DDP model.
#include <cmath>

#include "autograd/engine.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/variable.h"
#include "parallel/ddp/ddp.h"
#include "parallel/ddp/powersgd_hook.h"
#include "tensor/compare.h"
#include "tensor/ops/linalg.h"
#include "tests/mp/parallel/ddp_models.h"
#include "tests/mp/parallel/hook_test_support.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using parallel::PowerSGDOptions;
using parallel::PowerSGDState;

namespace {

const std::vector<Shape> kShapes{{8, 6}, {8}, {3, 2}};  // 62 elements: an 8x8 square with 2 of padding
constexpr int64_t kNumel = 62;

double value(int rank, int64_t i) {
  const auto x = static_cast<double>(i);
  return std::sin(0.37 * x * x + 1.9 * rank + 0.5) + 0.1 * rank;
}

Tensor run_once(const parallel::NamedCommHook& hook, int rank, bool is_last = true) {
  parallel::GradBucket bucket = make_bucket(kShapes, [&](int64_t i) { return value(rank, i); });
  return hook.hook(bucket).value();
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "batched PowerSGD: averages before start, exact at full rank after", "[powersgd][batched]") {
  auto pg = shared_group();
  const RankValues v{value, DType::Float32};
  const std::vector<double> avg = v.average(size(), kNumel);
  PowerSGDOptions o;
  o.matrix_approximation_rank = 8;  // the side of the padded square: nothing is lost
  o.start_powersgd_iter = 2;
  auto state = std::make_shared<PowerSGDState>(pg, o);
  const auto hook = parallel::batched_powersgd_hook(state);
  for (int it = 0; it < 4; ++it) {
    INFO("iteration " << it);
    const Tensor got = run_once(hook, rank());
    // Exact: the average of the inputs; the errors are each rank's deviation from it (powersgd_hook.h), which
    // cancel over the ranks, so the result stays the plain average of the gradients.
    CHECK(all_close(got, avg, 1e-4, 1e-5));
  }
  CHECK(state->iteration() == 4);
  TensorList errors{state->error(0)};
  finish(pg->allreduce(errors));
  CHECK(max_abs_error(errors[0], std::vector<double>(64, 0.0)) < 1e-4);
}

TEST_CASE_METHOD(MpFixture, "batched PowerSGD: rank 1 gives a rank-1 square, equal on every rank", "[powersgd][batched]") {
  auto pg = shared_group();
  PowerSGDOptions o;
  o.matrix_approximation_rank = 1;
  o.start_powersgd_iter = 2;
  auto state = std::make_shared<PowerSGDState>(pg, o);
  const auto hook = parallel::batched_powersgd_hook(state);
  (void)run_once(hook, rank());
  (void)run_once(hook, rank());
  parallel::GradBucket bucket = make_bucket(kShapes, [&](int64_t i) { return value(rank(), i); });
  const Tensor got = hook.hook(bucket).value().clone();
  // Rank 1 as an 8x8 matrix: every 2x2 minor with the first row and column vanishes (the two padding
  // entries were dropped from the result, so minors reaching them are skipped).
  Tensor square = zeros({64});
  square.narrow(0, 0, kNumel).copy_(got);
  const std::vector<double> m = to_vector<double>(square);
  double worst = 0, scale = 0;
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) scale = std::max(scale, std::abs(m[static_cast<size_t>(i * 8 + j)]));
  }
  for (int i = 1; i < 8; ++i) {
    for (int j = 1; j < 8; ++j) {
      if (i * 8 + j >= kNumel) continue;
      worst = std::max(worst, std::abs(m[0] * m[static_cast<size_t>(i * 8 + j)] - m[static_cast<size_t>(j)] * m[static_cast<size_t>(i * 8)]));
    }
  }
  CHECK(worst <= 1e-4 * scale * scale);
  // The same on every rank.
  TensorList sum{got.clone()};
  finish(pg->allreduce(sum));
  CHECK(allclose(braid::div(sum[0], double(size())), got, 1e-5, 1e-6));
  // Error feedback over the padded square; statistics count the bucket and the two factors.
  CHECK(state->error(0).numel() == 64);
  CHECK(state->compression_stats().numel_before_compression == kNumel);
  CHECK(state->compression_stats().numel_after_compression == 2 * 8);
}

TEST_CASE_METHOD(MpFixture, "batched PowerSGD: through register_comm_hook on a DDP model", "[powersgd][batched]") {
  auto pg = shared_group();
  auto model = std::make_shared<ParityNet>(31);
  auto twin = std::make_shared<ParityNet>(31);
  parallel::DDPOptions dopts;
  dopts.process_group = pg;
  parallel::DistributedDataParallel ddp(model, dopts);
  PowerSGDOptions o;
  o.matrix_approximation_rank = 2;
  o.start_powersgd_iter = 2;
  ddp.register_comm_hook(parallel::batched_powersgd_hook(std::make_shared<PowerSGDState>(pg, o)));
  for (int step = 0; step < 4; ++step) {
    INFO("step " << step);
    Generator gen(900 + static_cast<uint64_t>(step * 8 + rank()));
    const Tensor x = rand({2, 2}, {}, &gen), y = rand({2, 4}, {}, &gen);
    autograd::backward(autograd::mse_loss(ddp.forward(x), y));
    twin->zero_grad();
    autograd::backward(autograd::mse_loss(twin->forward(x), y));
    const auto got = model->parameters(), mine = twin->parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      const Tensor g = autograd::grad(got[i]);
      // Before start_powersgd_iter: the plain average. After: a compressed average, the same on every rank.
      TensorList avg{step < 2 ? autograd::grad(mine[i]).clone() : g.clone()};
      finish(pg->allreduce(avg));
      CHECK(allclose(g, braid::div(avg[0], double(size())), 1e-4, 1e-6));
      CHECK(allclose(g, g));  // finite (NaN is not close to itself)
    }
    model->zero_grad();
  }
}

TEST_CASE_METHOD(MpFixture, "batched PowerSGD: a rank-1 gradient at full rank is still exact", "[powersgd][batched]") {
  // P = M Q has one independent column: the others are rounding noise, which must not be normalized into
  // spurious directions (powersgd_math.h).
  auto pg = shared_group();
  const auto v = [](int r, int64_t i) {
    return (r + 1) * (1.0 + static_cast<double>(i / 8)) * std::cos(static_cast<double>(i % 8));
  };
  const RankValues rv{v, DType::Float32};
  const std::vector<double> avg = rv.average(size(), kNumel);
  PowerSGDOptions o;
  o.matrix_approximation_rank = 8;
  o.start_powersgd_iter = 2;
  const auto hook = parallel::batched_powersgd_hook(std::make_shared<PowerSGDState>(pg, o));
  for (int it = 0; it < 4; ++it) {
    parallel::GradBucket bucket = make_bucket(kShapes, [&](int64_t i) { return v(rank(), i); });
    const Tensor got = hook.hook(bucket).value();
    INFO("iteration " << it << ": max error " << max_abs_error(got, avg));
    CHECK(all_close(got, avg, 1e-4, 1e-5));
  }
}
