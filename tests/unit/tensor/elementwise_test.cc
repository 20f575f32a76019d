// Elementwise ops against naive reference loops, for every dtype (and every dtype pair for binary ops):
// arithmetic, comparisons, logic, bits, unary math, where and clamp; plus the promotion table and
// float16/bfloat16 rounding.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <optional>
#include <string>

#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tests/unit/tensor/elementwise_test_util.h"

namespace braid {
namespace {

using test::check_values;
using test::libm_rtol;
using test::sample;

using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&)>;

struct NamedBinary {
  BinaryOp op;
  BinaryFn fn;
};

// Every binary op through its named function, so that the sweep also covers the wrappers.
const std::vector<NamedBinary>& named_binaries() {
  static const std::vector<NamedBinary> ops = {
      {BinaryOp::Add, [](const Tensor& a, const Tensor& b) { return add(a, b); }},
      {BinaryOp::Sub, [](const Tensor& a, const Tensor& b) { return sub(a, b); }},
      {BinaryOp::Mul, [](const Tensor& a, const Tensor& b) { return mul(a, b); }},
      {BinaryOp::Div, [](const Tensor& a, const Tensor& b) { return div(a, b); }},
      {BinaryOp::Pow, [](const Tensor& a, const Tensor& b) { return pow(a, b); }},
      {BinaryOp::Maximum, [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {BinaryOp::Minimum, [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
      {BinaryOp::Eq, [](const Tensor& a, const Tensor& b) { return eq(a, b); }},
      {BinaryOp::Ne, [](const Tensor& a, const Tensor& b) { return ne(a, b); }},
      {BinaryOp::Lt, [](const Tensor& a, const Tensor& b) { return lt(a, b); }},
      {BinaryOp::Le, [](const Tensor& a, const Tensor& b) { return le(a, b); }},
      {BinaryOp::Gt, [](const Tensor& a, const Tensor& b) { return gt(a, b); }},
      {BinaryOp::Ge, [](const Tensor& a, const Tensor& b) { return ge(a, b); }},
      {BinaryOp::LogicalAnd, [](const Tensor& a, const Tensor& b) { return logical_and(a, b); }},
      {BinaryOp::LogicalOr, [](const Tensor& a, const Tensor& b) { return logical_or(a, b); }},
      {BinaryOp::BitwiseAnd, [](const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }},
      {BinaryOp::BitwiseOr, [](const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }},
      {BinaryOp::BitwiseXor, [](const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }},
  };
  return ops;
}

bool bool_valued(BinaryOp op) {
  return op == BinaryOp::Eq || op == BinaryOp::Ne || op == BinaryOp::Lt || op == BinaryOp::Le ||
         op == BinaryOp::Gt || op == BinaryOp::Ge || op == BinaryOp::LogicalAnd || op == BinaryOp::LogicalOr;
}

bool is_bitwise(BinaryOp op) {
  return op == BinaryOp::BitwiseAnd || op == BinaryOp::BitwiseOr || op == BinaryOp::BitwiseXor;
}

// Integer reference: exact int64 values, wrapping through uint64; the caller narrows (modulo 2^n) to the
// dtype afterwards, which commutes with +, -, * and repeated multiplication.
int64_t ref_int(BinaryOp op, int64_t x, int64_t y) {
  const auto ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
  switch (op) {
    case BinaryOp::Add: return static_cast<int64_t>(ux + uy);
    case BinaryOp::Sub: return static_cast<int64_t>(ux - uy);
    case BinaryOp::Mul: return static_cast<int64_t>(ux * uy);
    case BinaryOp::Pow: {
      if (y < 0) return x == 1 ? 1 : x == -1 ? (y % 2 == 0 ? 1 : -1) : 0;
      uint64_t r = 1;
      for (int64_t i = 0; i < y; ++i) r *= ux;
      return static_cast<int64_t>(r);
    }
    case BinaryOp::Maximum: return std::max(x, y);
    case BinaryOp::Minimum: return std::min(x, y);
    case BinaryOp::Eq: return x == y;
    case BinaryOp::Ne: return x != y;
    case BinaryOp::Lt: return x < y;
    case BinaryOp::Le: return x <= y;
    case BinaryOp::Gt: return x > y;
    case BinaryOp::Ge: return x >= y;
    case BinaryOp::LogicalAnd: return x != 0 && y != 0;
    case BinaryOp::LogicalOr: return x != 0 || y != 0;
    case BinaryOp::BitwiseAnd: return x & y;
    case BinaryOp::BitwiseOr: return x | y;
    case BinaryOp::BitwiseXor: return x ^ y;
    case BinaryOp::Div: break;
  }
  FAIL("no integer reference for " << op_name(op));
  return 0;
}

double ref_float(BinaryOp op, double x, double y) {
  switch (op) {
    case BinaryOp::Add: return x + y;
    case BinaryOp::Sub: return x - y;
    case BinaryOp::Mul: return x * y;
    case BinaryOp::Div: return x / y;
    case BinaryOp::Pow: return std::pow(x, y);
    case BinaryOp::Maximum: return std::isnan(x) ? x : std::isnan(y) ? y : (x < y ? y : x);
    case BinaryOp::Minimum: return std::isnan(x) ? x : std::isnan(y) ? y : (y < x ? y : x);
    case BinaryOp::Eq: return x == y;
    case BinaryOp::Ne: return x != y;
    case BinaryOp::Lt: return x < y;
    case BinaryOp::Le: return x <= y;
    case BinaryOp::Gt: return x > y;
    case BinaryOp::Ge: return x >= y;
    case BinaryOp::LogicalAnd: return x != 0 && y != 0;
    case BinaryOp::LogicalOr: return x != 0 || y != 0;
    default: break;
  }
  FAIL("no floating reference for " << op_name(op));
  return 0;
}

// Applies the reference to a and b (already in the compute dtype, broadcast to one shape) and converts
// the exact result to `result` dtype.
Tensor reference(BinaryOp op, const Tensor& a, const Tensor& b, DType result) {
  const Shape shape = a.shape();
  const Tensor ae = a.expand(shape), be = b.expand(shape);
  if (!is_floating(a.dtype())) {
    const auto x = to_vector<int64_t>(ae), y = to_vector<int64_t>(be);
    std::vector<int64_t> r(x.size());
    for (size_t i = 0; i < x.size(); ++i) r[i] = ref_int(op, x[i], y[i]);
    return from_vector<int64_t>(r, shape).to(result);
  }
  const auto x = to_vector<double>(ae), y = to_vector<double>(be);
  std::vector<double> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = ref_float(op, x[i], y[i]);
  return from_vector<double>(r, shape).to(result);
}

TEST_CASE("elementwise: every binary op on every dtype pair matches the reference", "[elementwise]") {
  for (const auto& [op, fn] : named_binaries()) {
    for (DType da : kRealDTypes) {
      for (DType db : kRealDTypes) {
        INFO(op_name(op) << "(" << dtype_name(da) << ", " << dtype_name(db) << ")");
        const Tensor a = sample(da, 0);
        const Tensor b = sample(db, 1);
        const DType promoted = promote_types(da, db);
        const bool invalid = (op == BinaryOp::Sub && (da == DType::Bool || db == DType::Bool)) ||
                             (op == BinaryOp::Pow && promoted == DType::Bool) ||
                             (is_bitwise(op) && is_floating(promoted));
        if (invalid) {
          REQUIRE_THROWS_WITH(fn(a, b), Catch::Contains(std::string(op_name(op))) && Catch::Contains(a.describe()) &&
                                            Catch::Contains(b.describe()));
          continue;
        }
        const DType compute = op == BinaryOp::Div && !is_floating(promoted) ? DType::Float32 : promoted;
        const DType result = bool_valued(op) ? DType::Bool : compute;
        const Tensor got = fn(a, b);
        CHECK(binary_result_dtype(op, da, db) == result);
        const double rtol = op == BinaryOp::Pow && is_floating(compute) ? libm_rtol(compute) : 0.0;
        check_values(got, reference(op, a.to(compute), b.to(compute), result), rtol);
      }
    }
  }
}

TEST_CASE("elementwise: tensor-scalar ops on every dtype match the reference", "[elementwise]") {
  const std::vector<BinaryOp> ops = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Pow,
                                     BinaryOp::Eq,  BinaryOp::Ne,  BinaryOp::Lt,  BinaryOp::Le,  BinaryOp::Gt,
                                     BinaryOp::Ge};
  // Exactly representable in every floating dtype, so the reference needs no rounding model.
  const std::vector<Scalar> scalars = {Scalar(3), Scalar(2.5), Scalar(-1.5), Scalar(true), Scalar(0)};
  for (BinaryOp op : ops) {
    for (DType dt : kRealDTypes) {
      for (const Scalar& s : scalars) {
        INFO(op_name(op) << "(" << dtype_name(dt) << ", scalar " << s.to_double() << ")");
        const Tensor a = sample(dt, 0);
        const DType promoted = s.result_dtype_with(dt);
        if ((op == BinaryOp::Sub && (dt == DType::Bool || s.kind() == Scalar::Kind::Bool)) ||
            (op == BinaryOp::Pow && promoted == DType::Bool)) {
          REQUIRE_THROWS_WITH(binary(op, a, s), Catch::Contains(std::string(op_name(op))) && Catch::Contains(a.describe()));
          continue;
        }
        const DType compute = op == BinaryOp::Div && !is_floating(promoted) ? DType::Float32 : promoted;
        const DType result = bool_valued(op) ? DType::Bool : compute;
        const Tensor got = binary(op, a, s);
        const Tensor b = full(a.shape(), s, compute);
        const double rtol = op == BinaryOp::Pow && is_floating(compute) ? libm_rtol(compute) : 0.0;
        check_values(got, reference(op, a.to(compute), b, result), rtol);
      }
    }
  }
  // The operator and named spellings agree with binary().
  const Tensor a = sample(DType::Int32, 0);
  check_values(a + 2, add(a, 2));
  check_values(a - 2, sub(a, 2));
  check_values(a * 2, mul(a, 2));
  check_values(a / 2, div(a, 2));
  check_values(pow(a, 2), binary(BinaryOp::Pow, a, 2));
  check_values(eq(a, 3), binary(BinaryOp::Eq, a, 3));
}

double ref_unary(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Log: return std::log(x);
    case UnaryOp::Sqrt: return std::sqrt(x);
    case UnaryOp::Tanh: return std::tanh(x);
    case UnaryOp::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case UnaryOp::Neg: return -x;
    case UnaryOp::Relu: return x < 0 ? 0.0 : x;
    case UnaryOp::Abs: return std::abs(x);
    case UnaryOp::Sign: return static_cast<double>((0 < x) - (x < 0));
    case UnaryOp::LogicalNot: return x == 0;
    case UnaryOp::Erf: return std::erf(x);
  }
  return 0;
}

int64_t ref_unary_int(UnaryOp op, int64_t x) {
  switch (op) {
    case UnaryOp::Neg: return static_cast<int64_t>(0 - static_cast<uint64_t>(x));
    case UnaryOp::Relu: return x < 0 ? 0 : x;
    case UnaryOp::Abs: return x < 0 ? static_cast<int64_t>(0 - static_cast<uint64_t>(x)) : x;
    case UnaryOp::Sign: return (0 < x) - (x < 0);
    case UnaryOp::LogicalNot: return x == 0;
    default: break;
  }
  FAIL("no integer reference for " << op_name(op));
  return 0;
}

TEST_CASE("elementwise: every unary op on every dtype matches the reference", "[elementwise]") {
  const std::vector<std::pair<UnaryOp, std::function<Tensor(const Tensor&)>>> ops = {
      {UnaryOp::Neg, [](const Tensor& a) { return neg(a); }},
      {UnaryOp::Exp, [](const Tensor& a) { return exp(a); }},
      {UnaryOp::Log, [](const Tensor& a) { return log(a); }},
      {UnaryOp::Sqrt, [](const Tensor& a) { return sqrt(a); }},
      {UnaryOp::Tanh, [](const Tensor& a) { return tanh(a); }},
      {UnaryOp::Erf, [](const Tensor& a) { return erf(a); }},
      {UnaryOp::Sigmoid, [](const Tensor& a) { return sigmoid(a); }},
      {UnaryOp::Relu, [](const Tensor& a) { return relu(a); }},
      {UnaryOp::Abs, [](const Tensor& a) { return abs(a); }},
      {UnaryOp::Sign, [](const Tensor& a) { return sign(a); }},
      {UnaryOp::LogicalNot, [](const Tensor& a) { return logical_not(a); }},
  };
  for (const auto& [op, fn] : ops) {
    for (DType dt : kRealDTypes) {
      INFO(op_name(op) << "(" << dtype_name(dt) << ")");
      const Tensor a = sample(dt, 0);
      if (dt == DType::Bool && (op == UnaryOp::Neg || op == UnaryOp::Relu)) {
        REQUIRE_THROWS_WITH(fn(a), Catch::Contains(std::string(op_name(op))) && Catch::Contains(a.describe()));
        continue;
      }
      const bool transcendental = op == UnaryOp::Exp || op == UnaryOp::Log || op == UnaryOp::Sqrt ||
                                  op == UnaryOp::Tanh || op == UnaryOp::Sigmoid || op == UnaryOp::Erf;
      const DType compute = transcendental && !is_floating(dt) ? DType::Float32 : dt;
      const DType result = op == UnaryOp::LogicalNot ? DType::Bool : compute;
      const Tensor got = fn(a);
      Tensor want;
      if (is_floating(compute)) {
        auto x = to_vector<double>(a.to(compute));
        for (double& v : x) v = ref_unary(op, v);
        want = from_vector<double>(x, a.shape()).to(result);
      } else {
        auto x = to_vector<int64_t>(a);
        for (int64_t& v : x) v = ref_unary_int(op, v);
        want = from_vector<int64_t>(x, a.shape()).to(result);
      }
      check_values(got, want, transcendental ? libm_rtol(compute) : 0.0);
      CHECK(unary(op, a).dtype() == result);
    }
  }
  // -x on floats is a sign flip: -(0.0) is -0.0.
  CHECK(std::signbit(to_vector<double>(-zeros({1}))[0]));
}

TEST_CASE("elementwise: where on every dtype pair matches the reference", "[elementwise][where]") {
  const Tensor cond = from_vector<bool>({true, false, false, true, true, false}, {2, 3});
  for (DType da : kRealDTypes) {
    for (DType db : kRealDTypes) {
      INFO("where(" << dtype_name(da) << ", " << dtype_name(db) << ")");
      const Tensor a = sample(da, 0);
      const Tensor b = sample(db, 1, {3});  // broadcasts along dim 0
      const DType r = promote_types(da, db);
      const Tensor got = where(cond, a, b);
      const auto c = to_vector<bool>(cond);
      const Tensor ar = a.to(r), br = b.to(r).expand({2, 3});
      if (is_floating(r)) {
        const auto x = to_vector<double>(ar), y = to_vector<double>(br);
        std::vector<double> w(6);
        for (size_t i = 0; i < 6; ++i) w[i] = c[i] ? x[i] : y[i];
        check_values(got, from_vector<double>(w, {2, 3}).to(r));
      } else {
        const auto x = to_vector<int64_t>(ar), y = to_vector<int64_t>(br);
        std::vector<int64_t> w(6);
        for (size_t i = 0; i < 6; ++i) w[i] = c[i] ? x[i] : y[i];
        check_values(got, from_vector<int64_t>(w, {2, 3}).to(r));
      }
    }
  }
}

TEST_CASE("elementwise: clamp on every dtype matches the reference", "[elementwise][clamp]") {
  struct Bounds {
    std::optional<Scalar> lo, hi;
  };
  const std::vector<Bounds> bounds = {{Scalar(0), Scalar(100)},
                                      {Scalar(-1.5), Scalar(2.5)},
                                      {std::nullopt, Scalar(5)},
                                      {Scalar(5), std::nullopt},
                                      {Scalar(4), Scalar(2)}};  // lo > hi: everything becomes hi
  for (DType dt : kRealDTypes) {
    for (const Bounds& bd : bounds) {
      INFO("clamp(" << dtype_name(dt) << ", " << (bd.lo ? bd.lo->to_double() : NAN) << ", "
                    << (bd.hi ? bd.hi->to_double() : NAN) << ")");
      const Tensor a = sample(dt, 0);
      DType r = dt;
      if (bd.lo) r = bd.lo->result_dtype_with(r);
      if (bd.hi) r = bd.hi->result_dtype_with(r);
      const Tensor got = clamp(a, bd.lo, bd.hi);
      auto x = to_vector<double>(a.to(r));
      const double lo = bd.lo ? bd.lo->to_double() : -INFINITY, hi = bd.hi ? bd.hi->to_double() : INFINITY;
      if (is_floating(r)) {
        for (double& v : x) v = std::min(std::max(v, lo), hi);
        check_values(got, from_vector<double>(x, a.shape()).to(r));
      } else {
        auto xi = to_vector<int64_t>(a.to(r));
        for (int64_t& v : xi) {
          if (bd.lo && v < bd.lo->to_int()) v = bd.lo->to_int();
          if (bd.hi && v > bd.hi->to_int()) v = bd.hi->to_int();
        }
        check_values(got, from_vector<int64_t>(xi, a.shape()).to(r));
      }
      if (r == dt) {
        const Tensor c = a.clone();
        clamp_(c, bd.lo, bd.hi);
        check_values(c, got);
      } else {
        REQUIRE_THROWS_WITH(clamp_(a.clone(), bd.lo, bd.hi), Catch::Contains("can't be cast to the desired output type"));
      }
    }
  }
  REQUIRE_THROWS_WITH(clamp(sample(DType::Bool, 0), true, std::nullopt), Catch::Contains("clamp") && Catch::Contains("Bool"));
  REQUIRE_THROWS_WITH(clamp(sample(DType::Float32, 0), std::nullopt, std::nullopt),
                      Catch::Contains("clamp: At least one of 'min' or 'max' must not be None"));
}

TEST_CASE("elementwise: NaN propagates through maximum, minimum, clamp and relu", "[elementwise]") {
  const Tensor a = from_vector<float>({NAN, 1.0f, NAN, -2.0f}, {4});
  const Tensor b = from_vector<float>({0.0f, NAN, NAN, 3.0f}, {4});
  for (const Tensor& r : {maximum(a, b), minimum(a, b)}) {
    const auto v = to_vector<float>(r);
    CHECK(std::isnan(v[0]));
    CHECK(std::isnan(v[1]));
    CHECK(std::isnan(v[2]));
  }
  CHECK(to_vector<float>(maximum(a, b))[3] == 3.0f);
  CHECK(to_vector<float>(minimum(a, b))[3] == -2.0f);
  const auto c = to_vector<float>(clamp(a, -1.0, 1.0));
  CHECK(std::isnan(c[0]));
  CHECK(c[3] == -1.0f);
  const auto cn = to_vector<float>(clamp(from_vector<float>({1.0f, 2.0f}), NAN, 1.0));
  CHECK((std::isnan(cn[0]) && std::isnan(cn[1])));  // a NaN bound gives NaN, as in PyTorch
  CHECK(std::isnan(to_vector<float>(relu(a))[0]));
  CHECK(to_vector<float>(sign(a))[0] == 0.0f);
  for (DType dt : {DType::Float16, DType::BFloat16, DType::Float64}) {
    CHECK(std::isnan(to_vector<double>(maximum(a.to(dt), b.to(dt)))[1]));
  }
}

TEST_CASE("elementwise: promotion table", "[elementwise][promotion]") {
  auto t = [](DType dt) { return ones({2}, dt); };
  CHECK(add(t(DType::UInt8), t(DType::Int8)).dtype() == DType::Int32);
  CHECK(add(t(DType::Int32), t(DType::Float16)).dtype() == DType::Float16);
  CHECK(add(t(DType::Float16), t(DType::BFloat16)).dtype() == DType::Float32);
  CHECK(add(t(DType::Int64), t(DType::Float32)).dtype() == DType::Float32);
  CHECK(add(t(DType::Bool), t(DType::UInt8)).dtype() == DType::UInt8);
  CHECK(mul(t(DType::Float32), t(DType::Float64)).dtype() == DType::Float64);
  CHECK(div(t(DType::Int32), t(DType::Int64)).dtype() == DType::Float32);
  CHECK(div(t(DType::Bool), t(DType::Bool)).dtype() == DType::Float32);
  CHECK(div(t(DType::Float16), t(DType::Int64)).dtype() == DType::Float16);
  CHECK(eq(t(DType::Float16), t(DType::Int8)).dtype() == DType::Bool);
  CHECK(pow(t(DType::Int32), 2).dtype() == DType::Int32);
  CHECK(pow(t(DType::Int32), 0.5).dtype() == DType::Float32);
  CHECK(exp(t(DType::Int64)).dtype() == DType::Float32);
  CHECK(exp(t(DType::Float64)).dtype() == DType::Float64);
  // bool + bool stays bool with logical-or semantics: torch.tensor([True]) + torch.tensor([True]) is [True].
  const Tensor tt = from_vector<bool>({true, true, false, false});
  const Tensor tf = from_vector<bool>({true, false, true, false});
  const Tensor s = tt + tf;
  CHECK(s.dtype() == DType::Bool);
  CHECK(to_vector<bool>(s) == std::vector<bool>{true, true, true, false});
  CHECK(to_vector<bool>(tt * tf) == std::vector<bool>{true, false, false, false});
  // Scalars: a float scalar makes an integral tensor float32; an int scalar keeps the tensor's dtype
  // (int8 + 1000 wraps, as in PyTorch); an int scalar with a bool tensor gives int64.
  const Tensor i = from_vector<int32_t>({1, 2});
  const Tensor f = i + 2.5;
  CHECK(f.dtype() == DType::Float32);
  CHECK(to_vector<float>(f) == std::vector<float>{3.5f, 4.5f});
  CHECK((t(DType::Int8) + 1000).dtype() == DType::Int8);
  CHECK(to_vector<int64_t>(t(DType::Int8) + 1000) == std::vector<int64_t>{-23, -23});
  CHECK((t(DType::Bool) + 1).dtype() == DType::Int64);
  CHECK((t(DType::Float16) * 3).dtype() == DType::Float16);
  CHECK((t(DType::Float16) * 3.0).dtype() == DType::Float16);
  CHECK(lt(t(DType::UInt8), 2.5).dtype() == DType::Bool);
}

TEST_CASE("elementwise: float16/bfloat16 compute in float and round once", "[elementwise][half]") {
  // 2048 + 1 is not a float16 value: ties-to-even gives 2048; 2048 + 3 gives 2052.
  const Tensor h = from_vector<float>({2048.f, 2048.f, 1.f}).to(DType::Float16);
  const Tensor one = from_vector<float>({1.f, 3.f, 0.0004f}).to(DType::Float16);
  CHECK(to_vector<float>(h + one) == std::vector<float>{2048.f, 2052.f, 1.f});
  // bfloat16 has 8 significant bits: 256 + 1 -> 256, 256 + 3 -> 260.
  const Tensor bf = from_vector<float>({256.f, 256.f}).to(DType::BFloat16);
  CHECK(to_vector<float>(bf + from_vector<float>({1.f, 3.f}).to(DType::BFloat16)) == std::vector<float>{256.f, 260.f});
  // Every float16 value in [0, 2048) times a scalar: the product is formed in float (the scalar is not
  // rounded to float16 first) and rounded to float16 once.
  const Tensor xs = arange(0, 2048, 1, DType::Float32).div(full({2048}, 7.0)).to(DType::Float16);
  const auto got = to_vector<Half>(xs * 0.1);
  const auto in = to_vector<Half>(xs);
  for (size_t i = 0; i < in.size(); ++i) {
    INFO("x = " << static_cast<float>(in[i]));
    CHECK(got[i].bits == Half(static_cast<float>(in[i]) * 0.1f).bits);
  }
  // Integer overflow past float16's range becomes inf, not a wrapped value.
  CHECK(std::isinf(to_vector<float>(full({1}, 60000, DType::Float16) * 2)[0]));
  // sum of float16 inputs rounds once: (a + b) computed in float, then rounded.
  const Tensor a = from_vector<float>({0.1f}).to(DType::Float16), b = from_vector<float>({0.2f}).to(DType::Float16);
  CHECK((a + b).item<Half>().bits == Half(static_cast<float>(a.item<Half>()) + static_cast<float>(b.item<Half>())).bits);
}

}  // namespace
}  // namespace braid
