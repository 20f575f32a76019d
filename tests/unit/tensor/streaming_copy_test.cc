// copy_scaled_streaming: the streaming path (every alignment of the destination, odd lengths, in place) and
// the fallback (dtype conversion, strided views) give dst = src * scale exactly as copy_ and mul_ do.
#include <catch2/catch.hpp>

#include "tensor/factory.h"
#include "tensor/streaming_copy.h"
#include "tensor/tensor.h"

namespace braid {
namespace {

// src * scale computed element by element, in T.
template <class T>
std::vector<T> expected(const Tensor& src, T scale) {
  std::vector<T> out;
  const Tensor c = src.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) out.push_back(c.data<T>()[i] * scale);
  return out;
}

template <class T>
std::vector<T> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<T>(c.data<T>(), c.data<T>() + c.numel());
}

TEMPLATE_TEST_CASE("copy_scaled_streaming writes src * scale at every offset and length", "[tensor][copy]", float,
                   double) {
  const DType dtype = std::is_same_v<TestType, float> ? DType::Float32 : DType::Float64;
  const Tensor pool = randn({80}, TensorOptions(dtype));
  for (int64_t offset = 0; offset < 5; ++offset) {  // 0..4 elements past the 64-byte aligned start
    for (int64_t n : {0, 1, 3, 4, 7, 8, 33, 64}) {
      const Tensor src = pool.narrow(0, 5 - offset, n).contiguous();
      const Tensor dst = zeros({80}, TensorOptions(dtype)).narrow(0, offset, n);
      copy_scaled_streaming(dst, src, 0.25);
      CHECK(values<TestType>(dst) == expected<TestType>(src, TestType(0.25)));
    }
  }
}

TEST_CASE("copy_scaled_streaming copies when the scale is 1 and scales in place", "[tensor][copy]") {
  const Tensor src = randn({3, 129});
  const Tensor dst = empty({3, 129});
  copy_scaled_streaming(dst, src);
  CHECK(values<float>(dst) == values<float>(src));

  const auto before = values<float>(dst);
  copy_scaled_streaming(dst, dst, 0.5);
  for (size_t i = 0; i < before.size(); ++i) CHECK(values<float>(dst)[i] == before[i] * 0.5f);
}

TEST_CASE("copy_scaled_streaming falls back to copy_ and mul_ for conversions and strides", "[tensor][copy]") {
  SECTION("float64 into float32") {
    const Tensor src = randn({17}, TensorOptions(DType::Float64));
    const Tensor dst = empty({17});
    copy_scaled_streaming(dst, src, 2.0);
    const Tensor want = src.to(DType::Float32).clone();
    want.mul_(2.0);
    CHECK(values<float>(dst) == values<float>(want));
  }
  SECTION("a transposed source") {
    const Tensor src = randn({5, 6}).transpose(0, 1);
    const Tensor dst = empty({6, 5});
    copy_scaled_streaming(dst, src, 3.0);
    CHECK(values<float>(dst) == expected<float>(src, 3.0f));
  }
  SECTION("an integer tensor: copied; a fractional scale fails as mul_ does") {
    const Tensor src = arange(10);
    const Tensor dst = empty({10}, TensorOptions(DType::Int64));
    copy_scaled_streaming(dst, src);
    CHECK(values<int64_t>(dst) == values<int64_t>(src));
    CHECK_THROWS_WITH(copy_scaled_streaming(dst, src, 0.5), Catch::Contains("can't be cast"));
  }
}

}  // namespace
}  // namespace braid
