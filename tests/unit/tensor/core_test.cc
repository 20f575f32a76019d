// The tensor core: dtypes and promotion, float16/bfloat16 rounding (exact bit patterns, exhaustive round
// trips and a brute-force nearest-value reference), Device parsing and wrap_dim.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "tensor/tensor.h"

namespace braid {
namespace {

uint16_t half_bits(float f) { return Half(f).bits; }
uint16_t bf16_bits(float f) { return BFloat16(f).bits; }
float half_value(uint16_t b) { return static_cast<float>(Half::from_bits(b)); }
float bf16_value(uint16_t b) { return static_cast<float>(BFloat16::from_bits(b)); }
uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
bool half_is_nan(uint16_t b) { return (b & 0x7c00u) == 0x7c00u && (b & 0x3ffu) != 0; }
bool bf16_is_nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

// Round-to-nearest-even by brute force: `table` holds the values of the non-negative bit patterns
// 0 .. inf in increasing order, with inf standing in as the next power of two (IEEE rounds as if the
// exponent range were unbounded, so values from halfway to it upwards overflow).
uint16_t nearest_even(const std::vector<double>& table, float f) {
  const double x = std::fabs(static_cast<double>(f));
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (x >= table.back()) return static_cast<uint16_t>(sign | (table.size() - 1));
  const auto hi = static_cast<size_t>(std::upper_bound(table.begin(), table.end(), x) - table.begin());
  const size_t lo = hi - 1;
  const double dlo = x - table[lo], dhi = table[hi] - x;
  size_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<uint16_t>(sign | pick);
}

std::vector<double> half_table() {
  std::vector<double> t;
  for (uint32_t b = 0; b < 0x7c00u; ++b) t.push_back(half_value(static_cast<uint16_t>(b)));
  t.push_back(65536.0);
  return t;
}

std::vector<double> bf16_table() {
  std::vector<double> t;
  for (uint32_t b = 0; b < 0x7f80u; ++b) t.push_back(bf16_value(static_cast<uint16_t>(b)));
  t.push_back(std::ldexp(1.0, 128));
  return t;
}

}  // namespace

TEST_CASE("dtype: names, sizes and name parsing", "[core][dtype]") {
  const std::vector<std::pair<std::string, size_t>> expected = {
      {"bool", 1},    {"uint8", 1},    {"int8", 1},    {"int32", 4},  {"int64", 8},
      {"float16", 2}, {"bfloat16", 2}, {"float32", 4}, {"float64", 8}};
  REQUIRE(kRealDTypes.size() == expected.size());
  for (size_t i = 0; i < kRealDTypes.size(); ++i) {
    CHECK(dtype_name(kRealDTypes[i]) == expected[i].first);
    CHECK(element_size(kRealDTypes[i]) == expected[i].second);
    CHECK(dtype_from_name(expected[i].first) == kRealDTypes[i]);
    CHECK(fmt::format("{}", kRealDTypes[i]) == expected[i].first);
  }
  CHECK(dtype_from_name("float") == DType::Float32);
  CHECK(dtype_from_name("double") == DType::Float64);
  CHECK(dtype_from_name("half") == DType::Float16);
  CHECK(dtype_from_name("long") == DType::Int64);
  CHECK(dtype_from_name("int") == DType::Int32);
  CHECK_FALSE(dtype_from_name("int16").has_value());
  CHECK_FALSE(dtype_from_name("Float32").has_value());
  CHECK(is_floating(DType::BFloat16));
  CHECK_FALSE(is_floating(DType::Int64));
  CHECK(is_integral(DType::Bool, true));
  CHECK_FALSE(is_integral(DType::Bool, false));
  CHECK(is_integral(DType::UInt8, false));
  CHECK_FALSE(is_integral(DType::Float16, true));
}

TEST_CASE("dtype: promote_types follows PyTorch's table (int16 -> int32)", "[core][dtype]") {
  using D = DType;
  const D b = D::Bool, u8 = D::UInt8, i8 = D::Int8, i32 = D::Int32, i64 = D::Int64, f16 = D::Float16,
          bf = D::BFloat16, f32 = D::Float32, f64 = D::Float64;
  // Rows and columns in kRealDTypes order.
  const D table[9][9] = {
      {b, u8, i8, i32, i64, f16, bf, f32, f64},          // bool
      {u8, u8, i32, i32, i64, f16, bf, f32, f64},        // uint8 (uint8 + int8 is int16 in PyTorch)
      {i8, i32, i8, i32, i64, f16, bf, f32, f64},        // int8
      {i32, i32, i32, i32, i64, f16, bf, f32, f64},      // int32
      {i64, i64, i64, i64, i64, f16, bf, f32, f64},      // int64
      {f16, f16, f16, f16, f16, f16, f32, f32, f64},     // float16
      {bf, bf, bf, bf, bf, f32, bf, f32, f64},           // bfloat16
      {f32, f32, f32, f32, f32, f32, f32, f32, f64},     // float32
      {f64, f64, f64, f64, f64, f64, f64, f64, f64}};    // float64
  for (size_t i = 0; i < 9; ++i) {
    for (size_t j = 0; j < 9; ++j) {
      INFO(dtype_name(kRealDTypes[i]) << " + " << dtype_name(kRealDTypes[j]));
      CHECK(promote_types(kRealDTypes[i], kRealDTypes[j]) == table[i][j]);
    }
  }
}

TEST_CASE("half: exact rounding of float to float16", "[core][half]") {
  CHECK(half_bits(1.0f) == 0x3C00);
  CHECK(half_bits(-2.0f) == 0xC000);
  CHECK(half_bits(0.5f) == 0x3800);
  CHECK(half_bits(65504.0f) == 0x7BFF);  // the largest half
  CHECK(half_bits(65519.99f) == 0x7BFF);
  CHECK(half_bits(65520.0f) == 0x7C00);  // halfway to 65536 rounds to even: infinity
  CHECK(half_bits(-65520.0f) == 0xFC00);
  CHECK(half_bits(1e10f) == 0x7C00);
  CHECK(half_bits(std::numeric_limits<float>::infinity()) == 0x7C00);
  CHECK(half_bits(-std::numeric_limits<float>::infinity()) == 0xFC00);
  CHECK(half_bits(0.0f) == 0x0000);
  CHECK(half_bits(-0.0f) == 0x8000);
  // Subnormals, in units of 2^-24.
  CHECK(half_bits(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(half_bits(std::ldexp(1.0f, -25)) == 0x0000);                   // tie -> even (0)
  CHECK(half_bits(-std::ldexp(1.0f, -25)) == 0x8000);                  // keeps the sign
  CHECK(half_bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 0x0001);
  CHECK(half_bits(3 * std::ldexp(1.0f, -25)) == 0x0002);               // 1.5 units: tie -> even (2)
  CHECK(half_bits(5 * std::ldexp(1.0f, -25)) == 0x0002);               // 2.5 units: tie -> even (2)
  CHECK(half_bits(1023 * std::ldexp(1.0f, -24)) == 0x03FF);            // largest subnormal
  CHECK(half_bits(1023.5f * std::ldexp(1.0f, -24)) == 0x0400);         // rounds up into the normals
  CHECK(half_bits(std::ldexp(1.0f, -14)) == 0x0400);                   // smallest normal
  CHECK(half_bits(std::ldexp(1.0f, -30)) == 0x0000);
  CHECK(half_bits(std::numeric_limits<float>::denorm_min()) == 0x0000);
  // Normal ties: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  CHECK(half_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);
  CHECK(half_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);
  CHECK(half_bits(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)) == 0x3C01);
  CHECK(half_bits(2049.0f) == 0x6800);  // 2048 (even) rather than 2050
  CHECK(half_bits(2051.0f) == 0x6802);  // 2052
  // NaN stays NaN (never infinity), also with only low payload bits and with the sign set.
  CHECK(half_is_nan(half_bits(std::numeric_limits<float>::quiet_NaN())));
  CHECK(half_is_nan(half_bits(from_bits(0x7F800001u))));
  CHECK(half_is_nan(half_bits(from_bits(0xFF800001u))));
  CHECK((half_bits(from_bits(0xFFC00000u)) & 0x8000) == 0x8000);
  // float16 -> float.
  CHECK(half_value(0x0001) == std::ldexp(1.0f, -24));
  CHECK(half_value(0x03FF) == 1023 * std::ldexp(1.0f, -24));
  CHECK(half_value(0x7BFF) == 65504.0f);
  CHECK(half_value(0x3555) == 0.333251953125f);
  CHECK(std::isinf(half_value(0xFC00)));
  CHECK(std::signbit(half_value(0x8000)));
  CHECK(std::isnan(half_value(0x7E00)));
}

TEST_CASE("bfloat16: exact rounding of float to bfloat16", "[core][half]") {
  CHECK(bf16_bits(1.0f) == 0x3F80);
  CHECK(bf16_bits(-1.0f) == 0xBF80);
  CHECK(bf16_bits(-0.0f) == 0x8000);
  CHECK(bf16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);      // tie between 1 and 1+2^-7 -> 1
  CHECK(bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);  // tie -> 1 + 2^-6 (even)
  CHECK(bf16_value(0x3F82) == 1.0f + std::ldexp(1.0f, -6));
  CHECK(bf16_bits(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)) == 0x3F81);
  CHECK(bf16_bits(257.0f) == 0x4380);  // 256 (even) rather than 258
  CHECK(bf16_bits(259.0f) == 0x4382);  // 260
  CHECK(bf16_bits(std::numeric_limits<float>::max()) == 0x7F80);  // rounds past the largest bfloat16
  CHECK(bf16_bits(from_bits(0x7F7F7FFFu)) == 0x7F7F);
  CHECK(bf16_bits(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(bf16_bits(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(bf16_bits(from_bits(0x00008000u)) == 0x0000);  // subnormal tie -> even
  CHECK(bf16_bits(from_bits(0x00018000u)) == 0x0002);
  CHECK(bf16_bits(from_bits(0x00010000u)) == 0x0001);
  CHECK(bf16_is_nan(bf16_bits(std::numeric_limits<float>::quiet_NaN())));
  CHECK(bf16_is_nan(bf16_bits(from_bits(0x7F800001u))));  // low payload bits: still NaN, not inf
  CHECK(bf16_is_nan(bf16_bits(from_bits(0x7FFFFFFFu))));  // would carry into the sign if rounded
  CHECK(bf16_bits(from_bits(0xFF800001u)) & 0x8000);
  CHECK(bf16_value(0x3F80) == 1.0f);
  CHECK(bf16_value(0x0001) == from_bits(0x00010000u));
}

TEST_CASE("half and bfloat16: every bit pattern survives a round trip through float", "[core][half]") {
  int nan_count = 0;
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const uint16_t back = half_bits(half_value(h));
    if (half_is_nan(h)) {
      ++nan_count;
      CHECK(std::isnan(half_value(h)));
      if (!half_is_nan(back) || (back & 0x8000) != (h & 0x8000)) FAIL_CHECK("half NaN 0x" << std::hex << b);
    } else if (back != h) {
      FAIL_CHECK("half 0x" << std::hex << b << " came back as 0x" << back);
    }
    const uint16_t bback = bf16_bits(bf16_value(h));
    if (bf16_is_nan(h)) {
      if (!bf16_is_nan(bback) || (bback & 0x8000) != (h & 0x8000)) FAIL_CHECK("bfloat16 NaN 0x" << std::hex << b);
    } else if (bback != h) {
      FAIL_CHECK("bfloat16 0x" << std::hex << b << " came back as 0x" << bback);
    }
  }
  CHECK(nan_count == 2 * 1023);
}

TEST_CASE("half and bfloat16: rounding matches a brute-force nearest-even reference", "[core][half]") {
  const std::vector<double> ht = half_table();
  const std::vector<double> bt = bf16_table();
  std::mt19937_64 rng(42);
  auto check_one = [&](float f) {
    if (std::isnan(f)) return;
    const uint16_t h = half_bits(f), hr = nearest_even(ht, f);
    if (h != hr) FAIL_CHECK("half(" << f << " = 0x" << std::hex << bits_of(f) << ") = 0x" << h << ", want 0x" << hr);
    const uint16_t b = bf16_bits(f), br = nearest_even(bt, f);
    if (b != br) FAIL_CHECK("bf16(" << f << " = 0x" << std::hex << bits_of(f) << ") = 0x" << b << ", want 0x" << br);
  };
  // Random float bit patterns across the whole range, and random values in the half range.
  for (int i = 0; i < 200000; ++i) check_one(from_bits(static_cast<uint32_t>(rng())));
  for (int i = 0; i < 200000; ++i) {
    const int e = static_cast<int>(rng() % 44) - 28;  // 2^-28 .. 2^16
    check_one(from_bits((static_cast<uint32_t>(e + 127) << 23) | static_cast<uint32_t>(rng() & 0x807fffffu)));
  }
  // Every float near each half value and each midpoint between neighbours.
  for (size_t i = 0; i + 1 < ht.size(); ++i) {
    const auto mid = static_cast<float>((ht[i] + ht[i + 1]) / 2);
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), static_cast<float>(ht[i])}) {
      check_one(f);
      check_one(-f);
    }
  }
  for (size_t i = 0; i + 1 < bt.size(); i += 7) {
    const auto mid = static_cast<float>((bt[i] + bt[i + 1]) / 2);
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e38f)}) check_one(f);
  }
}

TEST_CASE("Device: parse and str", "[core][device]") {
  CHECK(Device::parse("cpu") == Device::cpu());
  CHECK(Device::parse("cuda") == Device::cuda(0));
  CHECK(Device::parse("cuda:3") == Device::cuda(3));
  CHECK(Device::parse("cuda:3").str() == "cuda:3");
  CHECK(Device::cpu().str() == "cpu");
  CHECK(fmt::format("{}", Device::cuda(1)) == "cuda:1");
  CHECK_THROWS_WITH(Device::parse("gpu"), Catch::Contains("unknown device string 'gpu'") &&
                                              Catch::Contains("expected 'cpu', 'cuda' or 'cuda:N'"));
  CHECK_THROWS_WITH(Device::parse("CPU"), Catch::Contains("unknown device string"));
  CHECK_THROWS_WITH(Device::parse(""), Catch::Contains("unknown device string ''"));
  CHECK_THROWS_WITH(Device::parse("cuda:x"), Catch::Contains("device string") && Catch::Contains("'x'"));
  CHECK_THROWS_WITH(Device::parse("cuda:"), Catch::Contains("expected an integer"));
  CHECK_THROWS_WITH(Device::parse("cuda:-1"), Catch::Contains("CUDA index out of range"));
  CHECK_THROWS_WITH(Device::parse("cuda:5000"), Catch::Contains("CUDA index out of range"));
  CHECK_THROWS_AS(Device::parse("cuda:1:2"), InvalidArgument);
}

TEST_CASE("wrap_dim: negative dims and the out-of-range message", "[core][views]") {
  CHECK(wrap_dim(-1, 3, "op") == 2);
  CHECK(wrap_dim(-3, 3, "op") == 0);
  CHECK(wrap_dim(2, 3, "op") == 2);
  CHECK(wrap_dim(0, 0, "op") == 0);
  CHECK(wrap_dim(-1, 0, "op") == 0);
  CHECK_THROWS_WITH(wrap_dim(3, 3, "sum"),
                    Catch::StartsWith("sum: dimension out of range (expected to be in range of [-3, 2], but got 3)"));
  CHECK_THROWS_WITH(wrap_dim(-4, 3, "sum"), Catch::Contains("but got -4"));
  CHECK_THROWS_WITH(wrap_dim(1, 0, "op"), Catch::Contains("[-1, 0]"));
  const Tensor t = Tensor::empty({2, 3});
  CHECK(t.size(-1) == 3);
  CHECK_THROWS_WITH(t.size(2), Catch::Contains("size: dimension out of range"));
  CHECK_THROWS_WITH(t.transpose(0, 5), Catch::Contains("transpose: dimension out of range"));
  CHECK_THROWS_AS(Tensor().dim(), InvalidArgument);
}

TEST_CASE("shape helpers", "[core]") {
  CHECK(contiguous_strides({2, 3, 4}) == Shape{12, 4, 1});
  CHECK(contiguous_strides({}).empty());
  CHECK(contiguous_strides({2, 0, 3}) == Shape{3, 3, 1});
  CHECK(shape_numel({}) == 1);
  CHECK(shape_numel({2, 0}) == 0);
  CHECK(shape_str({2, 3}) == "[2, 3]");
  CHECK(shape_str({}) == "[]");
  CHECK(Tensor::empty({2, 3}, DType::Int64).describe() == "int64[2, 3] cpu");
  CHECK(Tensor().describe() == "undefined tensor");
  CHECK_THROWS_WITH(Tensor::empty({2, -1}), Catch::Contains("negative dimension -1"));
}

}  // namespace braid
