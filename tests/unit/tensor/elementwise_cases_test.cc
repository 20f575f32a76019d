// Elementwise ops: broadcasting corner cases, strided inputs, in-place forms with aliasing, the _out form,
// and every error path (each error names the op and both operands).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "tensor/cuda/device_api.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tests/unit/tensor/elementwise_test_util.h"

namespace braid {
namespace {

using Catch::Contains;
using test::check_values;

Tensor farange(int64_t n) { return arange(0, n, 1, DType::Float32); }

// Element (i, j) of a 2-D tensor via its strides, independent of any copy kernel.
float at(const Tensor& t, int64_t i, int64_t j) {
  return static_cast<const float*>(t.data_ptr())[i * t.stride(0) + j * t.stride(1)];
}

// Builds the expected [rows, cols] float tensor from f(i, j).
template <class F>
Tensor expect2d(int64_t rows, int64_t cols, F f) {
  std::vector<float> v;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) v.push_back(f(i, j));
  }
  return from_vector<float>(v, {rows, cols});
}

TEST_CASE("elementwise: broadcasting corner cases", "[elementwise][broadcast]") {
  const Tensor s = scalar_tensor(2.0);
  const Tensor m = farange(6).view({2, 3});
  check_values(s + m, expect2d(2, 3, [](int64_t i, int64_t j) { return float(i * 3 + j) + 2; }));
  check_values(m - s, expect2d(2, 3, [](int64_t i, int64_t j) { return float(i * 3 + j) - 2; }));
  CHECK((s * s).dim() == 0);
  CHECK((s * s).item<float>() == 4.0f);

  const Tensor col = farange(3).view({3, 1});
  const Tensor row = farange(4).view({1, 4});
  check_values(col * row, expect2d(3, 4, [](int64_t i, int64_t j) { return float(i * j); }));
  check_values(row - col, expect2d(3, 4, [](int64_t i, int64_t j) { return float(j - i); }));

  const Tensor cube = farange(24).view({2, 3, 4});
  const Tensor r = cube + farange(4);
  CHECK(r.shape() == Shape{2, 3, 4});
  const auto rv = to_vector<float>(r);
  for (int64_t k = 0; k < 24; ++k) CHECK(rv[k] == float(k + k % 4));
  CHECK((farange(8).view({2, 1, 4}) + farange(12).view({3, 4})).shape() == Shape{2, 3, 4});

  // Size-0 dimensions broadcast like any other size.
  CHECK((zeros({0, 3}) + farange(3)).shape() == Shape{0, 3});
  CHECK((zeros({0}) + ones({1})).shape() == Shape{0});
  CHECK((zeros({2, 0}) * ones({2, 1})).shape() == Shape{2, 0});
  CHECK(eq(zeros({0, 3}), 1).dtype() == DType::Bool);
  const Tensor empty = zeros({0, 3});
  empty.add_(1);
  CHECK(empty.numel() == 0);

  REQUIRE_THROWS_WITH(m + farange(4), Contains("add") && Contains("float32[2, 3]") && Contains("float32[4]"));
  REQUIRE_THROWS_WITH(mul(m, m.t()), Contains("mul") && Contains("float32[2, 3]") && Contains("float32[3, 2]"));
  REQUIRE_THROWS_WITH(zeros({0}) + ones({2}), Contains("add") && Contains("float32[0]") && Contains("float32[2]"));
}

TEST_CASE("elementwise: strided inputs (transposed, stepped, expanded)", "[elementwise][strided]") {
  const Tensor a = farange(12).view({3, 4});
  const Tensor at_ = a.t();  // [4, 3], strides [1, 4]
  const Tensor b = farange(12).view({4, 3});
  check_values(at_ + b, expect2d(4, 3, [&](int64_t i, int64_t j) { return at(a, j, i) + float(i * 3 + j); }));

  const Tensor stepped = a.slice(1, 0, 4, 2);  // [3, 2], columns 0 and 2
  check_values(stepped * stepped, expect2d(3, 2, [&](int64_t i, int64_t j) {
                 const float v = at(a, i, 2 * j);
                 return v * v;
               }));
  const Tensor ex = farange(4).view({1, 4}).expand({3, 4});
  check_values(a - ex, expect2d(3, 4, [](int64_t i, int64_t j) { return float(i * 4 + j) - float(j); }));
  check_values(maximum(stepped, ex.slice(1, 1, 3)), expect2d(3, 2, [&](int64_t i, int64_t j) {
                 return std::max(at(a, i, 2 * j), float(j + 1));
               }));

  // Unary and where on transposed inputs; mixed dtypes on strided inputs.
  check_values(neg(at_), expect2d(4, 3, [&](int64_t i, int64_t j) { return -at(a, j, i); }));
  const Tensor mask = gt(at_, 5.0);
  check_values(where(mask, at_, zeros({1})), expect2d(4, 3, [&](int64_t i, int64_t j) {
                 return at(a, j, i) > 5 ? at(a, j, i) : 0.f;
               }));
  const Tensor ints = arange(12).view({3, 4}).t();
  check_values(ints + at_, expect2d(4, 3, [&](int64_t i, int64_t j) { return 2 * at(a, j, i); }));

  // Larger odd shapes exercise the vector loops' tails and multi-row walks on every layout.
  const Tensor big = randn({67, 129});
  const Tensor bt = big.t();
  const auto x = to_vector<float>(big);
  for (const Tensor& y : {bt.contiguous().t(), big.clone()}) {
    const auto got = to_vector<float>(big * y + y);
    for (size_t k = 0; k < x.size(); ++k) REQUIRE(got[k] == x[k] * x[k] + x[k]);
  }
  const auto t2 = to_vector<float>(bt + 1.0);
  for (int64_t i = 0; i < 129; ++i) {
    for (int64_t j = 0; j < 67; ++j) REQUIRE(t2[i * 67 + j] == x[j * 129 + i] + 1.0f);
  }
}

TEST_CASE("elementwise: in-place forms, aliasing and versions", "[elementwise][inplace]") {
  SECTION("self aliases other") {
    const Tensor a = from_vector<float>({1, 2, 3});
    const uint64_t v0 = a.version();
    a.add_(a);
    CHECK(to_vector<float>(a) == std::vector<float>{2, 4, 6});
    CHECK(a.version() > v0);
    a.mul_(a);
    CHECK(to_vector<float>(a) == std::vector<float>{4, 16, 36});
  }
  SECTION("other is a transposed or broadcast view of self") {
    const Tensor a = farange(9).view({3, 3});
    const Tensor orig = a.clone();
    a.add_(a.t());
    check_values(a, expect2d(3, 3, [&](int64_t i, int64_t j) { return at(orig, i, j) + at(orig, j, i); }));
    const Tensor b = orig.clone();
    b.mul_(b.select(0, 2));  // row 2 broadcast over every row, including itself
    check_values(b, expect2d(3, 3, [&](int64_t i, int64_t j) { return at(orig, i, j) * at(orig, 2, j); }));
    const Tensor c = orig.clone();
    c.slice(0, 1, 3).sub_(c.slice(0, 0, 2));  // overlapping shifted rows
    check_values(c, expect2d(3, 3, [&](int64_t i, int64_t j) {
                   return i == 0 ? at(orig, i, j) : at(orig, i, j) - at(orig, i - 1, j);
                 }));
  }
  SECTION("strided self and alpha") {
    const Tensor a = farange(6).view({2, 3});
    const uint64_t v0 = a.version();
    a.t().add_(ones({3, 2}), 2);
    CHECK(to_vector<float>(a) == std::vector<float>{2, 3, 4, 5, 6, 7});
    a.sub_(farange(3), 3);
    CHECK(to_vector<float>(a) == std::vector<float>{2, 0, -2, 5, 3, 1});
    CHECK(a.version() >= v0 + 2);
    check_values(sub(a, a, -1), a * 2);
  }
  SECTION("dtype rules") {
    const Tensor l = from_vector<int64_t>({1, 2, 3});
    REQUIRE_THROWS_WITH(l.add_(from_vector<float>({1, 2, 3})),
                        Contains("add_") && Contains("result type Float can't be cast to the desired output type Long") &&
                            Contains("int64[3]") && Contains("float32[3]"));
    REQUIRE_THROWS_WITH(l.div_(l), Contains("result type Float can't be cast to the desired output type Long"));
    REQUIRE_THROWS_WITH(l.mul_(2.5), Contains("result type Float can't be cast to the desired output type Long") &&
                                         Contains("scalar 2.5"));
    REQUIRE_THROWS_WITH(from_vector<bool>({true}).add_(from_vector<int64_t>({1})),
                        Contains("result type Long can't be cast to the desired output type Bool"));
    REQUIRE_THROWS_WITH(unary_(UnaryOp::Exp, l), Contains("exp_") && Contains("result type Float can't be cast"));
    CHECK(to_vector<int64_t>(l) == std::vector<int64_t>{1, 2, 3});  // failed calls changed nothing

    // Narrower self: computed in the promoted dtype, then stored (wrapping / rounding) into self.
    const Tensor i = from_vector<int32_t>({std::numeric_limits<int32_t>::max(), 1});
    i.add_(from_vector<int64_t>({1, 1}));
    CHECK(to_vector<int32_t>(i) == std::vector<int32_t>{std::numeric_limits<int32_t>::min(), 2});
    const Tensor h = from_vector<float>({1.f}).to(DType::Float16);
    h.add_(from_vector<float>({0.0001f}));
    CHECK(h.item<float>() == 1.0f);
    const Tensor f = from_vector<float>({0.f, 2.f, -1.f});
    unary_(UnaryOp::LogicalNot, f);
    CHECK(to_vector<float>(f) == std::vector<float>{1, 0, 0});
    f.mul_(4).add_(0.5);
    CHECK(to_vector<float>(f) == std::vector<float>{4.5, 0.5, 0.5});
    f.div_(from_vector<float>({2, 2, 2}));
    CHECK(to_vector<float>(f) == std::vector<float>{2.25, 0.25, 0.25});
    const Tensor e = from_vector<double>({0.0, 1.0});
    unary_(UnaryOp::Exp, e);
    CHECK(to_vector<double>(e) == std::vector<double>{1.0, std::exp(1.0)});
  }
  SECTION("shape rules") {
    const Tensor a = ones({3});
    REQUIRE_THROWS_WITH(a.add_(ones({2, 3})), Contains("add_") && Contains("doesn't match the broadcast shape [2, 3]") &&
                                                  Contains("float32[3]") && Contains("float32[2, 3]"));
    const Tensor ex = ones({3}).expand({2, 3});
    REQUIRE_THROWS_WITH(ex.add_(1), Contains("more than one element of the written-to tensor"));
    REQUIRE_THROWS_WITH(ex.mul_(ones({2, 3})), Contains("mul") && Contains("single memory location"));
  }
}

TEST_CASE("elementwise: binary_out writes into a preallocated output", "[elementwise][out]") {
  const int64_t n = (1 << 16) + 7;
  const Tensor a = randn({n}), b = randn({n});
  const Tensor out = Tensor::empty({n});
  const void* p = out.data_ptr();
  const uint64_t v0 = out.version();
  binary_out(BinaryOp::Add, out, a, b);
  CHECK(out.data_ptr() == p);
  CHECK(out.version() > v0);
  const auto x = to_vector<float>(a), y = to_vector<float>(b), o = to_vector<float>(out);
  for (int64_t i = 0; i < n; ++i) REQUIRE(o[i] == x[i] + y[i]);
  binary_out(BinaryOp::Sub, out, a, b, 0.5);
  const auto o2 = to_vector<float>(out);
  for (int64_t i = 0; i < n; ++i) REQUIRE(o2[i] == x[i] - 0.5f * y[i]);
  // out may be an input (same layout), or overlap one in another layout.
  const Tensor c = a.clone();
  binary_out(BinaryOp::Mul, c, c, b);
  const auto o3 = to_vector<float>(c);
  for (int64_t i = 0; i < n; ++i) REQUIRE(o3[i] == x[i] * y[i]);
  const Tensor sq = farange(9).view({3, 3});
  binary_out(BinaryOp::Add, sq, sq.t(), sq);
  CHECK(to_vector<float>(sq) == std::vector<float>{0, 4, 8, 4, 8, 12, 8, 12, 16});
  binary_out(BinaryOp::Lt, Tensor::empty({3}, DType::Bool), farange(3), ones({1}));

  REQUIRE_THROWS_WITH(binary_out(BinaryOp::Add, Tensor::empty({n}, DType::Float64), a, b),
                      Contains("add_out") && Contains("result dtype float32"));
  REQUIRE_THROWS_WITH(binary_out(BinaryOp::Add, Tensor::empty({2}), a, b),
                      Contains("add_out") && Contains("broadcast shape") && Contains("float32[2]"));
  REQUIRE_THROWS_WITH(binary_out(BinaryOp::Eq, Tensor::empty({3}), farange(3), farange(3)),
                      Contains("eq_out") && Contains("result dtype bool"));
}

TEST_CASE("elementwise: integer semantics", "[elementwise][integer]") {
  const Tensor mx = from_vector<int32_t>({std::numeric_limits<int32_t>::max()});
  CHECK((mx + 1).item<int32_t>() == std::numeric_limits<int32_t>::min());
  CHECK((mx * 2).item<int32_t>() == -2);
  CHECK(neg(from_vector<int8_t>({-128})).item<int64_t>() == -128);
  CHECK(abs(from_vector<int64_t>({std::numeric_limits<int64_t>::min()})).item<int64_t>() ==
        std::numeric_limits<int64_t>::min());
  CHECK(to_vector<int32_t>(pow(from_vector<int32_t>({2, 1, -1, -1, 0, 5}), from_vector<int32_t>({10, -1, -3, -2, -1, 0}))) ==
        std::vector<int32_t>{1024, 1, -1, 1, 0, 1});
  CHECK(to_vector<uint8_t>(pow(from_vector<uint8_t>({2, 3}), 8)) == std::vector<uint8_t>{0, 161});  // 6561 mod 256
  const auto d = to_vector<float>(div(from_vector<int64_t>({1, -1, 0, 7}), from_vector<int64_t>({0, 0, 0, 2})));
  CHECK(d[0] == INFINITY);
  CHECK(d[1] == -INFINITY);
  CHECK(std::isnan(d[2]));
  CHECK(d[3] == 3.5f);
  CHECK(to_vector<uint8_t>(from_vector<uint8_t>({5}) - from_vector<uint8_t>({6})) == std::vector<uint8_t>{255});
  CHECK(to_vector<int64_t>(add(from_vector<int64_t>({1}), from_vector<int64_t>({2}), 3)) == std::vector<int64_t>{7});
}

TEST_CASE("elementwise: Tensor members and operators", "[elementwise]") {
  const Tensor a = from_vector<float>({1, 2, 3});
  const Tensor b = from_vector<float>({4, 5, 6});
  CHECK(to_vector<float>(a.add(b)) == std::vector<float>{5, 7, 9});
  CHECK(to_vector<float>(a.add(b, 2)) == std::vector<float>{9, 12, 15});
  CHECK(to_vector<float>(a.sub(b, 0.5)) == std::vector<float>{-1, -0.5, 0});
  CHECK(to_vector<float>(a.mul(b)) == std::vector<float>{4, 10, 18});
  CHECK(to_vector<float>(b.div(a)) == std::vector<float>{4, 2.5, 2});
  CHECK(to_vector<float>(-a) == std::vector<float>{-1, -2, -3});
  CHECK(to_vector<float>(a - 1) == std::vector<float>{0, 1, 2});
  CHECK(to_vector<float>(a / 2) == std::vector<float>{0.5, 1, 1.5});
  CHECK(to_vector<float>(a * b - a / b) == std::vector<float>{4 - 0.25f, 10 - 0.4f, 18 - 0.5f});
  CHECK(to_vector<bool>(logical_and(a, gt(b, 4.5))) == std::vector<bool>{false, true, true});
  CHECK(to_vector<bool>(logical_not(sub(a, 2))) == std::vector<bool>{false, true, false});
}

TEST_CASE("elementwise: errors name the op and both operands", "[elementwise][errors]") {
  const Tensor f = ones({2, 3});
  const Tensor bt = ones({3}, DType::Bool);
  const Tensor i = ones({2, 1}, DType::Int32);
  REQUIRE_THROWS_WITH(bt - bt, Contains("sub") && Contains("Subtraction, the `-` operator, with two bool tensors is not supported") &&
                                   Contains("bool[3]"));
  REQUIRE_THROWS_WITH(f - bt, Contains("Subtraction, the `-` operator, with a bool tensor is not supported") &&
                                  Contains("float32[2, 3]") && Contains("bool[3]"));
  REQUIRE_THROWS_WITH(f - true, Contains("with a bool tensor is not supported") && Contains("scalar True"));
  REQUIRE_THROWS_WITH(-bt, Contains("Negation, the `-` operator, on a bool tensor is not supported.") && Contains("bool[3]"));
  REQUIRE_THROWS_WITH(relu(bt), Contains("relu") && Contains("bool[3]"));
  REQUIRE_THROWS_WITH(pow(i, -1), Contains("Integers to negative integer powers are not allowed.") &&
                                      Contains("int32[2, 1]") && Contains("scalar -1"));
  REQUIRE_THROWS_WITH(pow(bt, true), Contains("pow") && Contains("Bool"));
  CHECK(to_vector<float>(pow(i, -1.0)) == std::vector<float>{1, 1});
  REQUIRE_THROWS_WITH(bitwise_and(f, i), Contains("bitwise_and") && Contains("float32") && Contains("float32[2, 3]") &&
                                             Contains("int32[2, 1]"));
  REQUIRE_THROWS_WITH(bitwise_xor(i, ones({1}, DType::Float64)), Contains("bitwise_xor") && Contains("float64"));
  REQUIRE_THROWS_WITH(add(i, i, 1.5), Contains("add") && Contains("alpha must not be a floating point number") &&
                                          Contains("int32[2, 1]"));
  REQUIRE_THROWS_WITH(add(f, f, true), Contains("Boolean alpha only supported for Boolean results"));
  REQUIRE_THROWS_WITH(where(f, f, f), Contains("where") && Contains("boolean") && Contains("float32[2, 3]"));
  REQUIRE_THROWS_WITH(where(bt, f, ones({2})), Contains("where") && Contains("float32[2, 3]") && Contains("float32[2]"));
  REQUIRE_THROWS_WITH(where(ones({4}, DType::Bool), f, f), Contains("where") && Contains("bool[4]"));
  REQUIRE_THROWS_WITH(add(Tensor(), f), Contains("add") && Contains("undefined"));
  REQUIRE_THROWS_WITH(exp(Tensor()), Contains("exp") && Contains("undefined"));
  REQUIRE_THROWS_AS(f + ones({4}), InvalidArgument);
}

TEST_CASE("elementwise: operands on different devices are rejected", "[elementwise][cuda]") {
  if (cuda::device_count() == 0) {
    WARN("skipped: no CUDA device (" << cuda::unavailable_reason() << ")");
    return;
  }
  const Tensor c = ones({2});
  const Tensor g = ones({2}, Device::cuda(0));
  REQUIRE_THROWS_WITH(c + g, Contains("add") && Contains("cpu") && Contains("cuda:0") && Contains("float32[2]"));
  REQUIRE_THROWS_WITH(c.add_(g), Contains("add") && Contains("cuda:0"));
  REQUIRE_THROWS_WITH(where(ones({2}, DType::Bool), c, g), Contains("where") && Contains("cuda:0"));
}

}  // namespace
}  // namespace braid
