// DDP's built-in comm hooks (parallel/ddp/default_hooks.h) on buckets built by hand: each hook's result
// against the exact average of the ranks' gradients, with the tolerances of torch's
// test_ddp_hooks.py (allreduce rtol 1e-5
// atol 0; fp16 and quantization atol 1e-4; noop + manual allreduce equal to allreduce); bf16 with a
// tolerance from its precision; the quantization hooks also bit for bit against a host re-implementation
// of PyTorch's arithmetic.
#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "base/error.h"
#include "parallel/ddp/default_hooks.h"
#include "tensor/sparse.h"
#include "tests/mp/parallel/hook_test_support.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using braid::parallel::GradBucket;

namespace {

const std::vector<Shape> kShapes{{4, 3}, {5}, {2, 2, 2}, {1}};  // 26 elements

// Positive gradients in [0.01, 0.04] (a small range: quantization steps of 0.04 / 255), different on
// every rank and element; positive so that relative tolerances are not defeated by cancellation.
double small_positive(int rank, int64_t i) { return 0.025 + 0.015 * std::sin(0.37 * static_cast<double>(i) + 1.3 * rank); }
// Both signs, in [-0.02, 0.02].
double small_signed(int rank, int64_t i) { return 0.02 * std::sin(0.61 * static_cast<double>(i) - 0.9 * rank); }

int64_t total_numel(const std::vector<Shape>& shapes) {
  int64_t n = 0;
  for (const Shape& s : shapes) n += shape_numel(s);
  return n;
}

GradBucket bucket_of(int rank, const RankValues& v, const std::vector<Shape>& shapes = kShapes, size_t index = 0) {
  return make_bucket(shapes, [&](int64_t i) { return v.value(rank, i); }, v.dtype, index);
}

// --- A host re-implementation of PyTorch's quantization hooks (MinMaxObserver qparams, quantize,
// dequantize, sum in rank order, divide), in float32 as PyTorch computes them.
struct HostQParams {
  float scale, zero_point;
};
HostQParams host_qparams(float lo, float hi) {
  const float min_neg = std::min(lo, 0.0f), max_pos = std::max(hi, 0.0f);
  const float scale = std::max((max_pos - min_neg) / 255.0f, std::numeric_limits<float>::epsilon());
  const float zp = std::clamp(0.0f - std::nearbyint(min_neg / scale), 0.0f, 255.0f);
  return {scale, zp};
}
std::vector<float> host_quantized_average(int ws, const std::function<float(int, int64_t)>& value, int64_t n,
                                          int64_t width) {
  const int64_t channels = (n + width - 1) / width;
  std::vector<float> sum(static_cast<size_t>(channels * width), 0.0f);
  for (int r = 0; r < ws; ++r) {
    std::vector<float> x(static_cast<size_t>(channels * width), 0.0f);
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = value(r, i);
    for (int64_t c = 0; c < channels; ++c) {
      const auto row = x.begin() + c * width;
      const HostQParams p = host_qparams(*std::min_element(row, row + width), *std::max_element(row, row + width));
      for (int64_t j = 0; j < width; ++j) {
        const size_t k = static_cast<size_t>(c * width + j);
        const float q = std::clamp(std::nearbyint(x[k] / p.scale) + p.zero_point, 0.0f, 255.0f);
        sum[k] += p.scale * (q - p.zero_point);
      }
    }
  }
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = sum[static_cast<size_t>(i)] / static_cast<float>(ws);
  return out;
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "comm hooks: allreduce_hook averages the bucket in place (rtol 1e-5, atol 0)", "[parallel][hooks]") {
  auto pg = shared_group();
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO("dtype " << dtype_name(dtype));
    const RankValues v{small_positive, dtype};
    GradBucket bucket = bucket_of(rank(), v);
    auto hook = parallel::allreduce_hook(pg);
    CHECK(hook.name == "allreduce");
    const Tensor result = hook.hook(bucket).value();
    CHECK(result.is_same(bucket.buffer()));  // in place, as PyTorch's allreduce hook
    CHECK(result.dtype() == dtype);
    const auto want = v.average(size(), total_numel(kShapes));
    CHECK(all_close(result, want, 1e-5, 0));
    // The per-parameter views see the averages too.
    CHECK(all_close(bucket.gradients()[1].reshape({5}), std::vector<double>(want.begin() + 12, want.begin() + 17), 1e-5, 0));
    report(rank(), fmt::format("allreduce {} ws={}: max |err| {:.3g}", dtype_name(dtype), size(), max_abs_error(result, want)));
  }
}

TEST_CASE_METHOD(MpFixture, "comm hooks: allreduce_hook on a sparse bucket uses the sparse allreduce", "[parallel][hooks][sparse]") {
  if (!supports_sparse()) return;
  auto pg = shared_group();
  const int ws = size();
  // Rank r has rows r and r+1 of a [ws + 1, 2] gradient, with values (r + 1) * [1, 2] (an embedding's
  // sparse gradient); the average has (r + 1 + r) / ws at rows 1..ws-1.
  Tensor indices = ints({rank(), rank() + 1}).view({1, 2});
  Tensor values = floats({1.0 * (rank() + 1), 2.0 * (rank() + 1), 1.0 * (rank() + 1), 2.0 * (rank() + 1)}).view({2, 2});
  const Tensor grad = SparseTensor(indices, values, {ws + 1, 2}).to_tensor();
  GradBucket bucket(0, 1, grad, {grad}, {zeros({ws + 1, 2})}, true);
  const Tensor result = parallel::allreduce_hook(pg).hook(bucket).value();
  REQUIRE(result.is_sparse());
  CHECK(result.sparse().shape() == Shape{ws + 1, 2});
  Tensor want = zeros({ws + 1, 2});
  for (int r = 0; r < ws; ++r) {
    for (int row : {r, r + 1}) {
      want.select(0, row).add_(floats({(r + 1.0) / ws, 2.0 * (r + 1.0) / ws}));
    }
  }
  CHECK_THAT(result.sparse().coalesce().to_dense(), Equals(want, 1e-6, 0));
  // The bucket's own sparse gradient is left as it was (it may be the parameter's .grad).
  CHECK_THAT(bucket.buffer().sparse().to_dense().select(0, rank()), Equals(floats({rank() + 1.0, 2.0 * (rank() + 1)})));
}

TEST_CASE_METHOD(MpFixture, "comm hooks: fp16_compress_hook within rtol 1e-5, atol 1e-4", "[parallel][hooks]") {
  auto pg = shared_group();
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO("dtype " << dtype_name(dtype));
    const RankValues v{small_positive, dtype};
    GradBucket bucket = bucket_of(rank(), v);
    const Tensor result = parallel::fp16_compress_hook(pg).hook(bucket).value();
    CHECK(result.is_same(bucket.buffer()));  // decompressed into the original buffer, its dtype kept
    CHECK(result.dtype() == dtype);
    const auto want = v.average(size(), total_numel(kShapes));
    CHECK(all_close(result, want, 1e-5, 1e-4));
    report(rank(), fmt::format("fp16_compress {} ws={}: max |err| {:.3g} (values <= 0.04)", dtype_name(dtype), size(),
                               max_abs_error(result, want)));
  }
}

TEST_CASE_METHOD(MpFixture, "comm hooks: bf16_compress_hook within three bfloat16 roundings", "[parallel][hooks]") {
  auto pg = shared_group();
  const RankValues v{small_positive};
  GradBucket bucket = bucket_of(rank(), v);
  const Tensor result = parallel::bf16_compress_hook(pg).hook(bucket).value();
  CHECK(result.is_same(bucket.buffer()));
  CHECK(result.dtype() == DType::Float32);
  const auto want = v.average(size(), total_numel(kShapes));
  // bfloat16 keeps 8 significant bits: each rounding is within 2^-8 relative. The hook rounds three
  // times (the cast, the division by ws, the reduced sum), so for same-sign values the result is within
  // 3 * 2^-8 = 1.2e-2 of the exact average, relatively; with values <= 0.04 that is below 4.7e-4.
  CHECK(all_close(result, want, 3.0 / 256, 0));
  CHECK(max_abs_error(result, want) <= 3.0 / 256 * 0.04);
  report(rank(), fmt::format("bf16_compress ws={}: max |err| {:.3g} (values <= 0.04)", size(), max_abs_error(result, want)));
}

TEST_CASE_METHOD(MpFixture, "comm hooks: quantize_per_tensor_hook within atol 1e-4 and equal to PyTorch's arithmetic", "[parallel][hooks][quantize]") {
  auto pg = shared_group();
  const int64_t n = total_numel(kShapes);
  for (auto* value : {&small_positive, &small_signed}) {
    const RankValues v{*value};
    GradBucket bucket = bucket_of(rank(), v);
    auto hook = parallel::quantize_per_tensor_hook(pg);
    CHECK(hook.name == "quantize_per_tensor");
    const Tensor result = hook.hook(bucket).value();
    CHECK(result.is_same(bucket.buffer()));
    const auto want = v.average(size(), n);
    CHECK(all_close(result, want, 1e-5, 1e-4));
    const auto host = host_quantized_average(size(), [&](int r, int64_t i) { return static_cast<float>(v.value(r, i)); }, n, n);
    CHECK_THAT(result, Equals(from_vector<float>(host, {n})));
    report(rank(), fmt::format("quantize_per_tensor ws={} values {}: max |err| {:.3g}", size(),
                               value == &small_positive ? "[0.01, 0.04]" : "[-0.02, 0.02]", max_abs_error(result, want)));
  }
}

TEST_CASE_METHOD(MpFixture, "comm hooks: quantize_per_channel_hook within atol 1e-4, rows of bucket_size padded", "[parallel][hooks][quantize]") {
  auto pg = shared_group();
  // 1200 elements: rows of 512, the last padded with 176 zeros; and rows of 7 with ranges that differ
  // per row (a scale per row matters there).
  for (int64_t width : {int64_t{512}, int64_t{7}}) {
    INFO("bucket_size " << width);
    const int64_t n = width == 512 ? 1200 : 40;
    const std::vector<Shape> shapes{{n / 4, 4}};
    const RankValues v{[&](int r, int64_t i) {
      return small_signed(r, i) * (width == 7 ? std::pow(0.5, static_cast<double>(i / 7)) : 1.0);
    }};
    GradBucket bucket = bucket_of(rank(), v, shapes);
    const Tensor result = parallel::quantize_per_channel_hook(pg, width).hook(bucket).value();
    CHECK(result.is_same(bucket.buffer()));
    const auto want = v.average(size(), n);
    CHECK(all_close(result, want, 1e-5, 1e-4));
    const auto host = host_quantized_average(size(), [&](int r, int64_t i) { return static_cast<float>(v.value(r, i)); }, n, width);
    CHECK_THAT(result, Equals(from_vector<float>(host, {n})));
    report(rank(), fmt::format("quantize_per_channel bucket_size={} ws={}: max |err| {:.3g}", width, size(),
                               max_abs_error(result, want)));
  }
}

TEST_CASE_METHOD(MpFixture, "comm hooks: noop_hook returns the local buffer; dividing and allreducing it equals allreduce_hook", "[parallel][hooks]") {
  auto pg = shared_group();
  const RankValues v{small_positive};
  GradBucket bucket = bucket_of(rank(), v);
  const Tensor local = bucket.buffer().clone();
  auto hook = parallel::noop_hook();
  CHECK(hook.name == "noop");
  auto fut = hook.hook(bucket);
  CHECK(fut.completed());  // no communication
  const Tensor result = fut.value();
  CHECK(result.is_same(bucket.buffer()));
  CHECK_THAT(result, Equals(local));
  // test_ddp_hooks.py's check: the noop result divided by ws and allreduced equals the allreduce hook's, exactly.
  binary_(BinaryOp::Div, result, Scalar(size()));
  TensorList list{result};
  finish(pg->allreduce(list));
  GradBucket again = bucket_of(rank(), v);
  CHECK_THAT(result, Equals(parallel::allreduce_hook(pg).hook(again).value()));
}

TEST_CASE_METHOD(MpFixture, "comm hooks: several buckets in flight keep every rank's op order", "[parallel][hooks]") {
  auto pg = shared_group();
  // Each hook issues its collectives from this thread without waiting: four buckets of each kind are
  // started before any future is read, and every result is still each bucket's own average.
  const std::vector<parallel::NamedCommHook> hooks{parallel::allreduce_hook(pg), parallel::fp16_compress_hook(pg),
                                                   parallel::quantize_per_tensor_hook(pg),
                                                   parallel::quantize_per_channel_hook(pg, 8)};
  std::vector<GradBucket> buckets;
  std::vector<RankValues> values;
  for (size_t b = 0; b < 4 * hooks.size(); ++b) {
    values.push_back(RankValues{[b](int r, int64_t i) { return small_positive(r, i + 13 * static_cast<int64_t>(b)); }});
    buckets.push_back(bucket_of(rank(), values.back(), kShapes, b));
  }
  std::vector<Future<Tensor>> futures;
  for (size_t b = 0; b < buckets.size(); ++b) futures.push_back(hooks[b % hooks.size()].hook(buckets[b]));
  for (size_t b = 0; b < buckets.size(); ++b) {
    INFO("bucket " << b << ", hook " << hooks[b % hooks.size()].name);
    CHECK(all_close(futures[b].value(), values[b].average(size(), total_numel(kShapes)), 1e-5, 1e-4));
  }
}

TEST_CASE_METHOD(MpFixture, "comm hooks: argument errors", "[parallel][hooks]") {
  CHECK_THROWS_AS(parallel::allreduce_hook(nullptr), InvalidArgument);
  CHECK_THROWS_AS(parallel::fp16_compress_hook(nullptr), InvalidArgument);
  CHECK_THROWS_AS(parallel::quantize_per_tensor_hook(nullptr), InvalidArgument);
  CHECK_THROWS_WITH(parallel::quantize_per_channel_hook(shared_group(), 0), Catch::Contains("bucket_size must be positive"));
  // Compression and quantization need a dense bucket; the check comes before any communication.
  const Tensor grad = SparseTensor(ints({0}).view({1, 1}), floats({1.0}), {3}).to_tensor();
  GradBucket sparse(2, 3, grad, {grad}, {zeros({3})}, false);
  CHECK_THROWS_WITH(parallel::bf16_compress_hook(shared_group()).hook(sparse), Catch::Contains("bucket 2 holds a sparse gradient"));
  CHECK_THROWS_WITH(parallel::quantize_per_tensor_hook(shared_group()).hook(sparse),
                    Catch::Contains("must hold a flat dense floating-point buffer"));
}
