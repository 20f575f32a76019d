// PowerSGD (parallel/ddp/powersgd_hook.h) on buckets built by hand: plain allreduce before
// start_powersgd_iter (only the is_last bucket counts an iteration); exact averages when the rank is high
// enough or the gradients have rank 1; error feedback's telescoping identity and what it implies for the
// running average; warm start's power iteration; the state's argument checks.
#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "base/error.h"
#include "parallel/ddp/default_hooks.h"
#include "parallel/ddp/powersgd_hook.h"
#include "tensor/ops/reduce.h"
#include "tensor/sparse.h"
#include "tests/mp/parallel/hook_test_support.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using braid::parallel::GradBucket;
using braid::parallel::PowerSGDOptions;
using braid::parallel::PowerSGDState;

namespace {

// An 8x6 matrix (compressed at rank 1 with min_compression_rate 2: (8 + 6) * 2 < 48), a bias (1-D:
// never compressed) and a 3x2 matrix (not worth compressing: (3 + 2) * 2 >= 6).
const std::vector<Shape> kShapes{{8, 6}, {8}, {3, 2}};
constexpr int64_t kNumel = 48 + 8 + 6;

// Full-rank, rank-dependent values of order 1.
double full_rank(int rank, int64_t i) {
  const auto x = static_cast<double>(i);
  return std::sin(0.37 * x * x + 1.9 * rank + 0.5) + 0.1 * rank;  // a quadratic phase: no low-rank structure
}

// Rank r's 8x6 matrix is (r + 1) u v^T with u_i = 1 + i / 4, v_j = cos(j): rank 1 on every rank and on
// average; the other two gradients are full_rank's.
double rank_one(int rank, int64_t i) {
  if (i >= 48) return full_rank(rank, i);
  const int64_t row = i / 6, col = i % 6;
  return (rank + 1) * (1.0 + static_cast<double>(row) / 4) * std::cos(static_cast<double>(col));
}

std::shared_ptr<PowerSGDState> make_state(const std::shared_ptr<ProcessGroup>& pg, PowerSGDOptions o) {
  return std::make_shared<PowerSGDState>(pg, o);
}

// One iteration of one bucket holding rank `r`'s values of `v`; returns the hook's result.
Tensor run_once(const parallel::NamedCommHook& hook, int r, const RankValues& v, size_t index = 0, bool is_last = true,
                size_t num_buckets = 1) {
  GradBucket bucket = make_bucket(kShapes, [&](int64_t i) { return v.value(r, i); }, v.dtype, index, is_last, num_buckets);
  const Tensor result = hook.hook(bucket).value();
  CHECK(result.is_same(bucket.buffer()));
  return result;
}

// The iterations before start_powersgd_iter (plain allreduce), each with one bucket.
void run_plain(const parallel::NamedCommHook& hook, int r, const RankValues& v, int iterations) {
  for (int i = 0; i < iterations; ++i) run_once(hook, r, v);
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "powersgd: plain allreduce before start_powersgd_iter; only the last bucket counts", "[parallel][powersgd]") {
  auto pg = shared_group();
  PowerSGDOptions o;
  o.start_powersgd_iter = 3;
  auto state = make_state(pg, o);
  const auto hook = parallel::powersgd_hook(state);
  CHECK(hook.name == "powersgd");
  const RankValues v{full_rank};
  // state.iter counts from 0 and the hook compresses once it reaches start_powersgd_iter: iterations
  // 1 to 3 are plain.
  for (int iter = 0; iter < 3; ++iter) {
    INFO("iteration " << iter + 1);
    // Two buckets per iteration; bucket 1 is reduced last.
    for (size_t b = 0; b < 2; ++b) {
      const Tensor got = run_once(hook, rank(), v, b, b == 1, 2);
      GradBucket plain = make_bucket(kShapes, [&](int64_t i) { return v.value(rank(), i); });
      CHECK_THAT(got, Equals(parallel::allreduce_hook(pg).hook(plain).value()));  // bit for bit
      CHECK(state->iteration() == iter + (b == 1 ? 1 : 0));
    }
  }
  CHECK(state->error(0).defined() == false);  // no compression yet
  // Iteration 4 compresses: the counter moves when the last bucket's future completes.
  run_once(hook, rank(), v, 0, false, 2);
  CHECK(state->iteration() == 3);
  run_once(hook, rank(), v, 1, true, 2);
  CHECK(state->iteration() == 4);
  CHECK(state->error(0).defined());
  const auto stats = state->compression_stats();
  CHECK(stats.numel_before_compression == 2 * kNumel);
  CHECK(stats.numel_after_compression == 2 * ((8 + 6) + 8 + 6));
}

TEST_CASE_METHOD(MpFixture, "powersgd: with rank >= min(rows, cols) the approximation is the exact average", "[parallel][powersgd]") {
  auto pg = shared_group();
  PowerSGDOptions o;
  o.start_powersgd_iter = 2;
  o.matrix_approximation_rank = 6;  // = min(8, 6); min(3, 2) for the small one, 1 for the bias
  o.min_compression_rate = 0;       // compress every gradient, the bias included
  auto state = make_state(pg, o);
  const auto hook = parallel::powersgd_hook(state);
  const RankValues v{full_rank};
  const auto want = v.average(size(), kNumel);
  run_plain(hook, rank(), v, 2);
  double worst = 0;
  for (int iter = 3; iter <= 5; ++iter) {
    INFO("iteration " << iter);
    const Tensor got = run_once(hook, rank(), v);
    CHECK(all_close(got, want, 1e-4, 1e-5));
    worst = std::max(worst, max_abs_error(got, want));
    // Nothing is lost, so each rank's error (input - result, PyTorch's) is only its deviation from the
    // average, added up once per compressed iteration: (iter - 2) (M_r - avg M).
    std::vector<double> drift(kNumel);
    for (int64_t i = 0; i < kNumel; ++i) {
      drift[static_cast<size_t>(i)] = (iter - 2) * (v.stored(rank(), i) - want[static_cast<size_t>(i)]);
    }
    CHECK(all_close(state->error(0), drift, 1e-4, 1e-4));
  }
  CHECK(state->compression_stats().numel_after_compression > state->compression_stats().numel_before_compression);
  report(rank(), fmt::format("powersgd full rank ws={}: max |err| {:.3g} (values of order 1)", size(), worst));
}

TEST_CASE_METHOD(MpFixture, "powersgd: rank 1 on rank-1 gradients is exact; the others are averaged uncompressed", "[parallel][powersgd]") {
  auto pg = shared_group();
  PowerSGDOptions o;
  o.start_powersgd_iter = 2;
  auto state = make_state(pg, o);
  const auto hook = parallel::powersgd_hook(state);
  const RankValues v{rank_one};
  const auto want = v.average(size(), kNumel);
  double worst = 0;
  for (int iter = 1; iter <= 5; ++iter) {  // 2 plain, 3 compressed
    INFO("iteration " << iter);
    const Tensor got = run_once(hook, rank(), v);
    CHECK(all_close(got, want, 1e-5, 1e-5));
    worst = std::max(worst, max_abs_error(got, want));
  }
  // Only the 8x6 matrix was compressed: (8 + 6) instead of 48 elements, the other 14 as they are.
  CHECK(state->compression_stats().numel_after_compression == 3 * (14 + 8 + 6));
  report(rank(), fmt::format("powersgd rank 1 on rank-1 gradients ws={}: max |err| {:.3g} (values up to {})", size(), worst,
                             size() * 2.25));
}

TEST_CASE_METHOD(MpFixture, "powersgd: error feedback telescopes, so the running average converges to the average", "[parallel][powersgd]") {
  auto pg = shared_group();
  // Every iteration feeds the same full-rank gradients M_r. With error feedback, rank r's input at step t
  // is M_r + e_{t-1} and e_t = input - A_t, so over T compressed steps
  //     A_1 + ... + A_T = T M_r - e_T          (on every rank, exact up to rounding)
  // and, averaging over ranks, (A_1 + ... + A_T) / T = avg(M) - avg_r(e_T) / T: the running average of
  // the approximations approaches the true average as long as the ranks' mean error stays bounded.
  // Without error feedback, A_t converges to the rank-1 power-iteration approximation, whose bias does
  // not shrink.
  const RankValues v{full_rank};
  const auto want = v.average(size(), kNumel);
  const std::vector<int> checkpoints{10, 20, 40};
  std::vector<double> bias[2];
  for (bool feedback : {true, false}) {
    INFO("use_error_feedback " << feedback);
    PowerSGDOptions o;
    o.start_powersgd_iter = 2;
    o.use_error_feedback = feedback;
    auto state = make_state(pg, o);
    const auto hook = parallel::powersgd_hook(state);
    run_plain(hook, rank(), v, 2);
    Tensor sum = zeros({kNumel}, DType::Float64);
    for (int t = 1; t <= checkpoints.back(); ++t) {
      sum.add_(run_once(hook, rank(), v).to(DType::Float64));
      if (std::find(checkpoints.begin(), checkpoints.end(), t) != checkpoints.end()) {
        bias[feedback ? 0 : 1].push_back(max_abs_error(div(sum, Scalar(t)), want));
      }
    }
    if (feedback) {
      const int steps = checkpoints.back();
      const Tensor err = state->error(0).to(DType::Float64);
      std::vector<double> identity(kNumel);
      for (int64_t i = 0; i < kNumel; ++i) identity[static_cast<size_t>(i)] = steps * v.stored(rank(), i);
      CHECK(all_close(add(sum, err), identity, 1e-5, 1e-4));
      report(rank(), fmt::format("powersgd error feedback ws={}: |sum A_t + e_T - T M_r| max {:.3g} over {} steps", size(),
                                 max_abs_error(add(sum, err), identity), steps));
    }
  }
  report(rank(), fmt::format("powersgd running-average bias after {} steps ws={}: with error feedback {:.3g}, without {:.3g}",
                             fmt::join(checkpoints, "/"), size(), fmt::join(bias[0], " / "), fmt::join(bias[1], " / ")));
  // With error feedback the bias falls like 1/T (it would be 4 times smaller from 10 to 40 steps; at
  // least 2 is asked for); without, it stays put, and ends at least twice as large.
  CHECK(bias[0].back() < bias[0].front() / 2);
  CHECK(bias[1].back() > bias[1].front() * 0.9);
  CHECK(bias[0].back() < bias[1].back() / 2);
}

TEST_CASE_METHOD(MpFixture, "powersgd: warm start makes Q a power iteration; without it Q is drawn afresh", "[parallel][powersgd]") {
  auto pg = shared_group();
  // Rank r's 8x6 matrix is (2(r + 1) / (ws + 1)) (5 e0 e0^T + e1 e1^T): the average is 5 e0 e0^T + e1 e1^T,
  // whose best rank-1 approximation is 5 e0 e0^T (singular values 5 and 1).
  const int ws = size();
  const RankValues v{[ws](int r, int64_t i) {
    const double scale = 2.0 * (r + 1) / (ws + 1);
    if (i == 0) return 5 * scale;
    if (i == 7) return scale;  // row 1, column 1
    return i >= 48 ? full_rank(r, i) : 0.0;
  }};
  std::vector<double> best = v.average(ws, kNumel);
  best[7] = 0;
  for (bool warm : {true, false}) {
    INFO("warm_start " << warm);
    PowerSGDOptions o;
    o.start_powersgd_iter = 2;
    o.use_error_feedback = false;
    o.warm_start = warm;
    const auto hook = parallel::powersgd_hook(make_state(pg, o));
    run_plain(hook, rank(), v, 2);
    Tensor last, previous;
    for (int t = 1; t <= 12; ++t) {
      previous = last;
      last = run_once(hook, rank(), v);
    }
    // Warm start: each step multiplies Q by M^T M, so Q's error shrinks by (1/5)^2 per step.
    if (warm) {
      CHECK(all_close(last, best, 0, 1e-5));
    } else {
      CHECK(max_abs_error(last, best) > 1e-4);  // one step from a random Q each time
      CHECK(max_abs_error(last, to_vector<double>(previous)) > 1e-6);
    }
    report(rank(), fmt::format("powersgd warm_start={} ws={}: |A_12 - best rank-1| max {:.3g}", warm, ws, max_abs_error(last, best)));
  }
}

TEST_CASE_METHOD(MpFixture, "powersgd: a sparse bucket is averaged uncompressed; argument errors", "[parallel][powersgd]") {
  auto pg = shared_group();
  PowerSGDOptions o;
  o.start_powersgd_iter = 2;
  auto state = make_state(pg, o);
  const auto hook = parallel::powersgd_hook(state);
  run_plain(hook, rank(), RankValues{full_rank}, 2);
  if (supports_sparse()) {
    const Tensor grad = SparseTensor(ints({rank()}).view({1, 1}), floats({2.0}), {size()}).to_tensor();
    GradBucket sparse(0, 1, grad, {grad}, {zeros({size()})}, true);
    const Tensor got = hook.hook(sparse).value();
    REQUIRE(got.is_sparse());
    CHECK_THAT(got.sparse().coalesce().to_dense(), Equals(full({size()}, 2.0 / size())));
    CHECK(state->iteration() == 3);
  }
  o.start_powersgd_iter = 1;
  CHECK_THROWS_WITH(PowerSGDState(pg, o), Catch::Contains("Expect `start_powerSGD_iter` > 1 if `use_error_feedback` or `warm_start` is enabled"));
  o.use_error_feedback = false;
  o.warm_start = false;
  CHECK_NOTHROW(PowerSGDState(pg, o));
  o.matrix_approximation_rank = 0;
  CHECK_THROWS_AS(PowerSGDState(pg, o), InvalidArgument);
  CHECK_THROWS_AS(PowerSGDState(nullptr, PowerSGDOptions{}), InvalidArgument);
  CHECK_THROWS_AS(parallel::powersgd_hook(nullptr), InvalidArgument);
}

TEST_CASE_METHOD(MpFixture, "powersgd: a state restored from state_dict continues exactly as the original", "[parallel][powersgd]") {
  auto pg = shared_group();
  const RankValues v{[](int r, int64_t i) { return full_rank(r, i); }};
  PowerSGDOptions o;
  o.start_powersgd_iter = 2;
  o.warm_start = false;  // every Q drawn from the seed sequence: the generator's state matters too
  o.random_seed = 7;
  const auto original = make_state(pg, o);
  const auto hook = parallel::powersgd_hook(original);
  run_plain(hook, rank(), v, 2);
  for (int t = 0; t < 3; ++t) run_once(hook, rank(), v);
  REQUIRE(hook.state_dict);
  const parallel::CommHookState saved = hook.state_dict();
  const auto restored = parallel::powersgd_hook(make_state(pg, o));
  restored.load_state_dict(saved);
  for (int t = 0; t < 3; ++t) {
    const std::vector<double> a = to_vector<double>(run_once(hook, rank(), v));
    const std::vector<double> b = to_vector<double>(run_once(restored, rank(), v));
    CHECK(a == b);  // bit for bit: error memory, iteration count and the seed sequence all came along
  }
  // A fresh state (nothing restored) computes something else: the comparison above can fail.
  const auto fresh = parallel::powersgd_hook(make_state(pg, o));
  run_plain(fresh, rank(), v, 2);
  CHECK(to_vector<double>(run_once(fresh, rank(), v)) != to_vector<double>(run_once(hook, rank(), v)));

  // Bad entries are named, and change nothing.
  parallel::CommHookState bad = saved;
  bad.emplace_back("bucket.x.q", zeros({2}));
  CHECK_THROWS_WITH(restored.load_state_dict(bad), Catch::Contains("unexpected entry 'bucket.x.q'"));
  bad = {saved.begin() + 1, saved.end()};
  CHECK_THROWS_WITH(restored.load_state_dict(bad), Catch::Contains("the state lacks 'iter'"));
  bad = saved;
  bad[0].second = zeros({2}, DType::Int64);
  CHECK_THROWS_WITH(restored.load_state_dict(bad), Catch::Contains("'iter' must be 1 int64 value(s)"));
}
