// Copies and conversion: copy_ between every dtype pair on strided layouts against a reference,
// to(dtype) rounding, contiguous, clone, item.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "tensor/dispatch.h"
#include "tensor/factory.h"
#include "tensor/tensor.h"

namespace braid {
namespace {

// Element (i, j) of a 2-D tensor, read through its strides (no copy_ involved).
template <class T>
T& at(const Tensor& t, int64_t i, int64_t j) {
  return static_cast<T*>(t.data_ptr())[i * t.stride(0) + j * t.stride(1)];
}

// The reference conversion, spelled out per kind of destination.
template <class D, class S>
D ref_convert(S v) {
  if constexpr (std::is_same_v<D, bool>) {
    return static_cast<double>(static_cast<opmath_t<S>>(v)) != 0.0;
  } else if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) {
    return D(static_cast<float>(static_cast<opmath_t<S>>(v)));
  } else if constexpr (std::is_integral_v<S> && !std::is_same_v<S, bool>) {
    return static_cast<D>(v);  // integer -> integer wraps (two's complement), integer -> float rounds
  } else {
    return static_cast<D>(static_cast<opmath_t<S>>(v));  // float -> integer truncates toward zero
  }
}

template <class T>
bool same_value(T a, T b) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return a.bits == b.bits;
  else return a == b;
}

// Values that every dtype can hold (non-negative, at most 127), with fractions for the floats.
double value_for(int64_t k, bool floating) {
  static const double kValues[] = {0, 1, 2.5, 3.75, 7, 100, 127, 0.5, 64.25, 12, 1.0 / 3, 99.9};
  const double v = kValues[k % 12];
  return floating ? v : std::floor(v);
}

// Source geometries (shape [3, 4]) and destination geometries, contiguous or not.
Tensor make_source(DType dtype, int layout) {
  switch (layout) {
    case 0: return Tensor::empty({3, 4}, dtype);
    case 1: return Tensor::empty({4, 6}, dtype).slice(1, 0, 6, 2).t();  // strides [2, 6]
    default: return Tensor::empty({3, 8}, dtype).slice(1, 1, 8, 2);   // offset 1, strides [8, 2]
  }
}

Tensor make_dest(DType dtype, int layout) {
  if (layout == 0) return Tensor::empty({3, 4}, dtype);
  return Tensor::empty({4, 3}, dtype).t();  // strides [1, 3]
}

}  // namespace

TEST_CASE("copy_: every dtype pair on strided layouts matches the reference conversion", "[core][copy]") {
  for (DType sd : kRealDTypes) {
    for (DType dd : kRealDTypes) {
      for (int sl = 0; sl < 3; ++sl) {
        for (int dl = 0; dl < 2; ++dl) {
          INFO(dtype_name(sd) << " -> " << dtype_name(dd) << " layouts " << sl << "," << dl);
          const Tensor src = make_source(sd, sl);
          const Tensor dst = make_dest(dd, dl);
          dispatch(sd, "test", [&]<class S>() {
            for (int64_t i = 0; i < 3; ++i) {
              for (int64_t j = 0; j < 4; ++j) {
                at<S>(src, i, j) = Scalar(value_for(i * 4 + j, is_floating(sd))).to<S>();
              }
            }
            dispatch(dd, "test", [&]<class D>() {
              dst.copy_(src);
              int bad = 0;
              for (int64_t i = 0; i < 3; ++i) {
                for (int64_t j = 0; j < 4; ++j) {
                  if (!same_value(at<D>(dst, i, j), ref_convert<D>(at<S>(src, i, j)))) ++bad;
                }
              }
              CHECK(bad == 0);
            });
          });
        }
      }
    }
  }
}

TEST_CASE("copy_: integer narrowing wraps and float to integer truncates", "[core][copy]") {
  const Tensor i64 = from_vector<int64_t>({300, -1, -129, 256, INT64_MAX});
  CHECK(to_vector<int32_t>(i64.to(DType::UInt8)) == std::vector<int32_t>{44, 255, 127, 0, 255});
  CHECK(to_vector<int32_t>(i64.to(DType::Int8)) == std::vector<int32_t>{44, -1, 127, 0, -1});
  CHECK(to_vector<int64_t>(i64.to(DType::Int32)) == std::vector<int64_t>{300, -1, -129, 256, -1});
  const Tensor f = from_vector<float>({2.7f, -2.7f, 0.5f, -0.0f});
  CHECK(to_vector<int64_t>(f.to(DType::Int64)) == std::vector<int64_t>{2, -2, 0, 0});
  CHECK(to_vector<bool>(f.to(DType::Bool)) == std::vector<bool>{true, true, true, false});
  CHECK(to_vector<float>(from_vector<bool>({true, false}).to(DType::Float32)) == std::vector<float>{1, 0});
  // int64 -> float32 rounds to nearest even; int64 -> float64 loses nothing below 2^53.
  const Tensor big = from_vector<int64_t>({(int64_t{1} << 24) + 1, (int64_t{1} << 24) + 3, (int64_t{1} << 53) - 1});
  CHECK(to_vector<float>(big.to(DType::Float32)) ==
        std::vector<float>{16777216.f, 16777220.f, 9007199254740992.f});
  CHECK(to_vector<double>(big.to(DType::Float64))[2] == 9007199254740991.0);
}

TEST_CASE("copy_: broadcasting source, size-0 and 0-dim tensors, and errors", "[core][copy]") {
  const Tensor dst = zeros({3, 4}, DType::Float64).t();
  dst.copy_(from_vector<int32_t>({1, 2, 3}));  // [3] broadcasts over the [4, 3] view
  CHECK(to_vector<double>(dst.t()) == std::vector<double>{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  dst.copy_(scalar_tensor(9, DType::Int64));
  CHECK(to_vector<double>(dst) == std::vector<double>(12, 9.0));
  const Tensor e = Tensor::empty({0, 3});
  CHECK_NOTHROW(e.copy_(zeros({0, 3}, DType::Int8)));
  const Tensor s = scalar_tensor(0.0);
  s.copy_(from_vector<Half>({Half(1.5f)}, {1, 1}).view({}));
  CHECK(s.item<double>() == 1.5);
  CHECK_THROWS_WITH(zeros({3}).copy_(zeros({4})), Catch::Contains("The size of tensor a (3) must match the size of "
                                                                   "tensor b (4)"));
  CHECK_THROWS_WITH(zeros({3}).copy_(zeros({2, 3})), Catch::Contains("does not broadcast to destination"));
  CHECK_THROWS_WITH(zeros({3}).copy_(Tensor()), Catch::Contains("source tensor is undefined"));
}

TEST_CASE("to(dtype): rounding to float16 and bfloat16", "[core][copy]") {
  const float tie_half = 1.0f + std::ldexp(1.0f, -11);
  const Tensor f = from_vector<float>({1.0f, 65504.0f, 65520.0f, tie_half, std::ldexp(1.0f, -25),
                                       3 * std::ldexp(1.0f, -25), -0.0f, std::nanf("")});
  const auto h = to_vector<Half>(f.to(DType::Float16));
  const std::vector<uint16_t> want = {0x3C00, 0x7BFF, 0x7C00, 0x3C00, 0x0000, 0x0002, 0x8000};
  for (size_t i = 0; i < want.size(); ++i) CHECK(h[i].bits == want[i]);
  CHECK(std::isnan(static_cast<float>(h[7])));
  const Tensor d = from_vector<double>({1.0 + std::ldexp(1.0, -8), 1.0 + 3 * std::ldexp(1.0, -8), 1e39});
  const auto b = to_vector<BFloat16>(d.to(DType::BFloat16));
  CHECK(b[0].bits == 0x3F80);
  CHECK(b[1].bits == 0x3F82);
  CHECK(b[2].bits == 0x7F80);  // beyond float range: infinity
  // float16 -> bfloat16 and back through the strided path.
  const Tensor hv = from_vector<float>({0.1f, 3.0f, -7.5f, 1000.f}, {2, 2}).to(DType::Float16).t();
  CHECK(to_vector<float>(hv.to(DType::BFloat16)) == std::vector<float>{0.10009765625f, -7.5f, 3.0f, 1000.f});
  // to() with the same dtype is the same tensor.
  CHECK(f.to(DType::Float32).is_same(f));
  CHECK_FALSE(f.to(DType::Float64).shares_storage_with(f));
  CHECK(f.to(Device::cpu()).is_same(f));
}

TEST_CASE("contiguous, clone and item", "[core][copy]") {
  const Tensor base = arange(0, 12, 1, DType::Float32).view({3, 4});
  CHECK(base.contiguous().is_same(base));
  const Tensor tr = base.t();
  const Tensor c = tr.contiguous();
  CHECK(c.is_contiguous());
  CHECK_FALSE(c.shares_storage_with(base));
  CHECK(c.strides() == Shape{3, 1});
  CHECK(to_vector<float>(c) == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  // clone is always a fresh contiguous copy, independent of the original.
  const Tensor k = base.clone();
  CHECK_FALSE(k.shares_storage_with(base));
  CHECK(k.dtype() == base.dtype());
  k.fill_(-1);
  CHECK(to_vector<float>(base)[5] == 5.0f);
  base.fill_(3);
  CHECK(to_vector<float>(k)[5] == -1.0f);
  CHECK(tr.clone().is_contiguous());
  CHECK(base.narrow(1, 1, 2).clone().storage()->nbytes() == 6 * sizeof(float));
  // item()
  CHECK(scalar_tensor(2.5).item<double>() == 2.5);
  CHECK(scalar_tensor(2.5).item<int>() == 2);
  CHECK(from_vector<int64_t>({(int64_t{1} << 53) + 1}, {1, 1}).item<int64_t>() == (int64_t{1} << 53) + 1);
  CHECK(from_vector<int64_t>({7}, {1}).item().kind() == Scalar::Kind::Int);
  CHECK(from_vector<bool>({true}).item().kind() == Scalar::Kind::Bool);
  CHECK(from_vector<Half>({Half(0.5f)}).item<float>() == 0.5f);
  CHECK(tr.select(0, 2).select(0, 1).item<float>() == 3.0f);
  CHECK_THROWS_WITH(base.item(), Catch::Contains("a Tensor with 12 elements cannot be converted to Scalar"));
  CHECK_THROWS_WITH(Tensor::empty({0}).item(), Catch::Contains("a Tensor with 0 elements"));
  CHECK_THROWS_WITH(base.data<double>(), Catch::Contains("data<float64>(): tensor has dtype float32"));
}

}  // namespace braid
