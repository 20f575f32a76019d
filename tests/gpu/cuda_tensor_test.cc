// CUDA tensors against the CPU: host/device copies, strided copies with dtype conversion, fill, every
// binary and unary op, where/clamp, reductions and arg-reductions, the caching allocator, several devices.
// The CPU results are the reference: the same front ends run on both devices, so the tests compare the
// CUDA kernels with the CPU kernels op by op and dtype by dtype.
//
// Without a usable GPU every test case but the first returns early with a warning saying so.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tensor/compare.h"
#include "tensor/cuda/device_api.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"
#include "tensor/tensor.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid {
namespace {

using gpu_test::check_matches;
using gpu_test::dname;
using gpu_test::no_gpu;
using gpu_test::same_bytes;
using gpu_test::sample;

const Device kGpu = Device::cuda(0);

constexpr BinaryOp kBinaryOps[] = {
    BinaryOp::Add,        BinaryOp::Sub,        BinaryOp::Mul,        BinaryOp::Div,     BinaryOp::Pow,
    BinaryOp::Maximum,    BinaryOp::Minimum,    BinaryOp::Eq,         BinaryOp::Ne,      BinaryOp::Lt,
    BinaryOp::Le,         BinaryOp::Gt,         BinaryOp::Ge,         BinaryOp::LogicalAnd, BinaryOp::LogicalOr,
    BinaryOp::BitwiseAnd, BinaryOp::BitwiseOr, BinaryOp::BitwiseXor};

constexpr UnaryOp kUnaryOps[] = {UnaryOp::Neg,  UnaryOp::Exp,     UnaryOp::Log,  UnaryOp::Sqrt, UnaryOp::Tanh,
                                 UnaryOp::Sigmoid, UnaryOp::Relu, UnaryOp::Abs, UnaryOp::Sign, UnaryOp::LogicalNot,
                                 UnaryOp::Erf};

TEST_CASE("cuda: a CUDA tensor without a usable device is refused with the reason", "[gpu]") {
  if (!cuda::is_built()) {
    CHECK_THROWS_WITH(Tensor::empty({2}, Device::cuda()), Catch::Contains("without CUDA"));
    return;
  }
  if (cuda::device_count() == 0) {
    CHECK_THROWS_WITH(Tensor::empty({2}, Device::cuda()), Catch::Contains("no CUDA device"));
    CHECK_FALSE(cuda::unavailable_reason().empty());
    return;
  }
  // With GPUs, an ordinal past the last one is what gets refused.
  CHECK_THROWS_WITH(Tensor::empty({2}, Device::cuda(cuda::device_count())), Catch::Contains("device"));
}

TEST_CASE("cuda: host/device round trips keep every dtype's bits", "[gpu]") {
  if (no_gpu()) return;
  for (DType dt : kRealDTypes) {
    INFO("dtype " << dname(dt));
    Tensor host = sample(dt, {7, 5}, 1);
    if (is_floating(dt)) {  // specials travel unchanged too
      const Tensor specials = from_vector<double>({std::nan(""), -0.0, std::numeric_limits<double>::infinity(),
                                                   -std::numeric_limits<double>::infinity(), 1e-300})
                                  .to(dt);
      host.view({35}).narrow(0, 0, 5).copy_(specials);
    }
    const Tensor dev = host.cuda();
    CHECK(dev.is_cuda());
    CHECK(dev.dtype() == dt);
    CHECK(same_bytes(dev.cpu(), host));
    // Device to device (clone) and back, and a non-contiguous view moved to the host.
    CHECK(same_bytes(dev.clone(), host));
    CHECK(same_bytes(dev.t().cpu(), host.t()));
    CHECK(same_bytes(host.t().cuda(), host.t()));
  }
}

TEST_CASE("cuda: copy with dtype conversion matches the CPU on strided layouts", "[gpu]") {
  if (no_gpu()) return;
  struct View {
    const char* name;
    Tensor (*apply)(const Tensor&);
  };
  const View views[] = {
      {"contiguous", [](const Tensor& t) { return t; }},
      {"permuted", [](const Tensor& t) { return t.permute({2, 0, 1}); }},
      {"step slice", [](const Tensor& t) { return t.slice(2, 0, 4, 2); }},
      {"expanded", [](const Tensor& t) { return t.narrow(0, 1, 1).expand({2, 3, 4}); }},
  };
  for (DType src : kRealDTypes) {
    for (DType dst : kRealDTypes) {
      // Negative floats into uint8 are undefined in C++ (and differ between CPU and GPU): not tested.
      const bool nonneg = dst == DType::UInt8 && is_floating(src);
      const Tensor host = sample(src, {2, 3, 4}, 2, nonneg);
      const Tensor dev = host.cuda();
      for (const View& v : views) {
        INFO(dname(src) << " -> " << dname(dst) << ", " << v.name);
        CHECK(same_bytes(v.apply(dev).to(dst), v.apply(host).to(dst)));
        // Into a non-contiguous destination of the view's shape (a reversed contiguous tensor, permuted).
        const Shape s = v.apply(host).shape();
        const Tensor out_dev = zeros({s[2], s[1], s[0]}, TensorOptions(dst, kGpu)).permute({2, 1, 0});
        const Tensor out_host = zeros({s[2], s[1], s[0]}, dst).permute({2, 1, 0});
        out_dev.copy_(v.apply(dev));
        out_host.copy_(v.apply(host));
        CHECK(same_bytes(out_dev, out_host));
      }
    }
  }
}

TEST_CASE("cuda: conversion rounds to 16-bit floats and keeps special values like the CPU", "[gpu]") {
  if (no_gpu()) return;
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> values = {1000.3, 65519.0, 65520.0, 70000.0, -70000.0, 1e-8, 6e-8, 3.14159265358979,
                                      1e-40, 0.0, -0.0, inf, -inf, std::nan(""), 1e300, 0.1};
  for (DType src : {DType::Float32, DType::Float64}) {
    const Tensor host = from_vector(values).to(src);
    for (DType dst : {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64, DType::Bool}) {
      INFO(dname(src) << " -> " << dname(dst));
      const Tensor a = host.cuda().to(dst);
      const Tensor b = host.to(dst);
      if (is_floating(dst)) {
        CHECK(allclose(a, b, 0, 0, /*equal_nan=*/true));
        // The first 13 values hold no NaN, so their bits must agree (-0.0, subnormals, rounding).
        const Tensor finite_a = a.cpu().narrow(0, 0, 13);
        const Tensor finite_b = b.narrow(0, 0, 13);
        CHECK(same_bytes(finite_a, finite_b));
      } else {
        CHECK(same_bytes(a, b));
      }
    }
  }
  const Tensor big = from_vector<int64_t>({(int64_t{1} << 53) + 1, -(int64_t{1} << 40), 123456789, 65519, 65521});
  for (DType dst : {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64, DType::Int8, DType::UInt8}) {
    INFO("int64 -> " << dname(dst));
    CHECK(same_bytes(big.cuda().to(dst), big.to(dst)));
  }
}

TEST_CASE("cuda: fill matches the CPU for every dtype", "[gpu]") {
  if (no_gpu()) return;
  const Scalar values[] = {Scalar(3), Scalar(-2), Scalar(2.5), Scalar(true), Scalar(false), Scalar(0.1),
                           Scalar(int64_t{1} << 40)};
  for (DType dt : kRealDTypes) {
    for (const Scalar& v : values) {
      INFO(dname(dt) << " <- " << v.to_double());
      const Tensor dev = zeros({4, 6}, TensorOptions(dt, kGpu));
      const Tensor host = zeros({4, 6}, dt);
      dev.fill_(v);
      host.fill_(v);
      CHECK(same_bytes(dev, host));
      // A strided view: the elements in between stay untouched.
      const Tensor dev2 = zeros({4, 6}, TensorOptions(dt, kGpu));
      const Tensor host2 = zeros({4, 6}, dt);
      dev2.slice(1, 0, 6, 2).fill_(v);
      host2.slice(1, 0, 6, 2).fill_(v);
      CHECK(same_bytes(dev2, host2));
    }
  }
}

TEST_CASE("cuda: binary ops match the CPU for every dtype", "[gpu]") {
  if (no_gpu()) return;
  for (DType dt : kRealDTypes) {
    const Tensor a = sample(dt, {4, 5}, 3);
    const Tensor b = sample(dt, {5}, 4);  // broadcast along dim 0
    const Tensor bt = sample(dt, {5, 4}, 5).t();  // non-contiguous
    for (BinaryOp op : kBinaryOps) {
      INFO(op_name(op) << " on " << dname(dt));
      for (const Tensor* other : {&b, &bt}) {
        Tensor expected;
        try {
          expected = binary(op, a, *other);
        } catch (const std::exception&) {
          continue;  // not defined for this dtype on the CPU either
        }
        check_matches(binary(op, a.cuda(), other->cuda()), expected);
      }
      // Tensor-scalar forms, including scalars that promote (0.5 with an integer tensor).
      for (const Scalar& s : {Scalar(2), Scalar(0.5), Scalar(-3)}) {
        Tensor expected;
        try {
          expected = binary(op, a, s);
        } catch (const std::exception&) {
          continue;
        }
        INFO("scalar " << s.to_double());
        check_matches(binary(op, a.cuda(), s), expected);
      }
    }
    // alpha scales b in add/sub.
    for (const Scalar& alpha : {Scalar(2), Scalar(-3)}) {
      Tensor expected;
      try {
        expected = binary(BinaryOp::Sub, a, b, alpha);
      } catch (const std::exception&) {
        continue;
      }
      INFO("sub with alpha on " << dname(dt));
      check_matches(binary(BinaryOp::Sub, a.cuda(), b.cuda(), alpha), expected);
      check_matches(binary(BinaryOp::Add, a.cuda(), b.cuda(), alpha), binary(BinaryOp::Add, a, b, alpha));
    }
  }
}

TEST_CASE("cuda: binary ops on mixed dtypes promote like the CPU", "[gpu]") {
  if (no_gpu()) return;
  for (DType da : kRealDTypes) {
    for (DType db : kRealDTypes) {
      const Tensor a = sample(da, {3, 4}, 6);
      const Tensor b = sample(db, {3, 4}, 7);
      for (BinaryOp op : {BinaryOp::Add, BinaryOp::Mul, BinaryOp::Lt, BinaryOp::Maximum}) {
        Tensor expected;
        try {
          expected = binary(op, a, b);
        } catch (const std::exception&) {
          continue;
        }
        INFO(op_name(op) << " on " << dname(da) << " and " << dname(db));
        check_matches(binary(op, a.cuda(), b.cuda()), expected);
      }
    }
  }
}

TEST_CASE("cuda: binary ops on NaN, infinities and signed zeros match the CPU", "[gpu]") {
  if (no_gpu()) return;
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) {
    const Tensor a = from_vector<double>({nan, 1.0, -0.0, inf, -inf, 0.0, nan}).to(dt);
    const Tensor b = from_vector<double>({1.0, nan, 0.0, inf, 5.0, -0.0, nan}).to(dt);
    for (BinaryOp op : kBinaryOps) {
      Tensor expected;
      try {
        expected = binary(op, a, b);
      } catch (const std::exception&) {
        continue;
      }
      INFO(op_name(op) << " on " << dname(dt));
      const Tensor got = binary(op, a.cuda(), b.cuda());
      check_matches(got, expected);
      // maximum/minimum pass an input through: the very bits (NaN, -0.0) must match.
      if (op == BinaryOp::Maximum || op == BinaryOp::Minimum) CHECK(same_bytes(got, expected));
    }
  }
}

TEST_CASE("cuda: unary ops match the CPU for every dtype", "[gpu]") {
  if (no_gpu()) return;
  for (DType dt : kRealDTypes) {
    const Tensor a = sample(dt, {4, 5}, 8);
    for (UnaryOp op : kUnaryOps) {
      INFO(op_name(op) << " on " << dname(dt));
      for (const Tensor& in : {a, a.t()}) {
        Tensor expected;
        try {
          expected = unary(op, in);
        } catch (const std::exception&) {
          continue;
        }
        check_matches(unary(op, in.cuda()), expected);
      }
    }
  }
}

TEST_CASE("cuda: unary ops on special values match the CPU", "[gpu]") {
  if (no_gpu()) return;
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) {
    const Tensor a = from_vector<double>({nan, -0.0, 0.0, inf, -inf, -1.0, 1e-3, 30.0, -30.0}).to(dt);
    for (UnaryOp op : kUnaryOps) {
      INFO(op_name(op) << " on " << dname(dt));
      const Tensor expected = unary(op, a);
      const Tensor got = unary(op, a.cuda());
      check_matches(got, expected);
      // relu/abs/neg/sign are exact: compare bits where no NaN is computed afresh.
      if (op == UnaryOp::Relu || op == UnaryOp::Sign || op == UnaryOp::LogicalNot) CHECK(same_bytes(got, expected));
    }
  }
}

TEST_CASE("cuda: where and clamp match the CPU", "[gpu]") {
  if (no_gpu()) return;
  const Tensor cond = sample(DType::Bool, {4, 1}, 9);
  for (DType dt : kRealDTypes) {
    INFO(dname(dt));
    const Tensor a = sample(dt, {4, 5}, 10);
    const Tensor b = sample(dt, {5}, 11);
    CHECK(same_bytes(where(cond.cuda(), a.cuda(), b.cuda()), where(cond, a, b)));
    CHECK(same_bytes(where(cond.cuda(), a.cuda().t().t(), b.cuda().expand({4, 5})), where(cond, a, b)));
    if (dt == DType::Bool) continue;
    check_matches(clamp(a.cuda(), Scalar(-1), Scalar(2)), clamp(a, Scalar(-1), Scalar(2)));
    check_matches(clamp(a.cuda(), std::nullopt, Scalar(1.5)), clamp(a, std::nullopt, Scalar(1.5)));
    check_matches(clamp(a.cuda(), Scalar(0), std::nullopt), clamp(a, Scalar(0), std::nullopt));
  }
}

TEST_CASE("cuda: reductions match the CPU for every dtype", "[gpu]") {
  if (no_gpu()) return;
  using Reduction = Tensor (*)(const Tensor&);
  const std::pair<const char*, Reduction> reductions[] = {
      {"sum()", [](const Tensor& t) { return sum(t); }},
      {"sum(1)", [](const Tensor& t) { return sum(t, {1}); }},
      {"sum(0, keepdim)", [](const Tensor& t) { return sum(t, {0}, true); }},
      {"sum(1, float64)", [](const Tensor& t) { return sum(t, {1}, false, DType::Float64); }},
      {"mean(1)", [](const Tensor& t) { return mean(t, {1}); }},
      {"prod(1)", [](const Tensor& t) { return prod(t, {1}); }},
      {"amax()", [](const Tensor& t) { return amax(t); }},
      {"amax(0)", [](const Tensor& t) { return amax(t, {0}); }},
      {"amin(1)", [](const Tensor& t) { return amin(t, {1}); }},
      {"max()", [](const Tensor& t) { return max(t); }},
      {"min()", [](const Tensor& t) { return min(t); }},
      {"all(1)", [](const Tensor& t) { return all(t, {1}); }},
      {"any()", [](const Tensor& t) { return any(t); }},
      {"any(0)", [](const Tensor& t) { return any(t, {0}); }},
      {"norm()", [](const Tensor& t) { return norm(t); }},
      {"norm(0, 1)", [](const Tensor& t) { return norm(t, 0.0, {1}); }},
      {"norm(1, 1)", [](const Tensor& t) { return norm(t, 1.0, {1}); }},
      {"norm(3, 0)", [](const Tensor& t) { return norm(t, 3.0, {0}); }},
      {"norm(inf, 1)", [](const Tensor& t) { return norm(t, std::numeric_limits<double>::infinity(), {1}); }},
      {"norm(-inf, 1)", [](const Tensor& t) { return norm(t, -std::numeric_limits<double>::infinity(), {1}); }},
      {"max(1).values", [](const Tensor& t) { return max(t, 1).values; }},
      {"max(1).indices", [](const Tensor& t) { return max(t, 1).indices; }},
      {"min(0, keepdim).values", [](const Tensor& t) { return min(t, 0, true).values; }},
      {"min(0, keepdim).indices", [](const Tensor& t) { return min(t, 0, true).indices; }},
      {"argmax()", [](const Tensor& t) { return argmax(t); }},
      {"argmax(1)", [](const Tensor& t) { return argmax(t, 1); }},
      {"argmin(0, keepdim)", [](const Tensor& t) { return argmin(t, 0, true); }},
  };
  for (DType dt : kRealDTypes) {
    const Tensor a = sample(dt, {6, 7}, 12);
    for (const Tensor& in : {a, a.t()}) {
      for (const auto& [name, reduce] : reductions) {
        INFO(name << " on " << dname(dt) << (in.is_contiguous() ? "" : " (transposed)"));
        Tensor expected;
        try {
          expected = reduce(in);
        } catch (const std::exception&) {
          continue;  // e.g. mean of integers
        }
        check_matches(reduce(in.cuda()), expected);
      }
    }
  }
}

TEST_CASE("cuda: arg-reductions pick the first extreme, and NaN wins", "[gpu]") {
  if (no_gpu()) return;
  const double nan = std::nan("");
  for (DType dt : {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) {
    INFO(dname(dt));
    const Tensor a = from_vector<double>({1, nan, 3, nan, 2, 2, -1, -1, 5, 5, 5, 5}, {3, 4}).to(dt);
    const Tensor d = a.cuda();
    CHECK(to_vector<int64_t>(argmax(d, 1)) == std::vector<int64_t>{1, 0, 0});
    CHECK(to_vector<int64_t>(argmin(d, 1)) == std::vector<int64_t>{1, 2, 0});
    CHECK(equal(argmax(d, 1).cpu(), argmax(a, 1)));
    CHECK(equal(argmin(d, 1).cpu(), argmin(a, 1)));
    const ValuesIndices m = max(d, 1);
    CHECK(std::isnan(to_vector<double>(m.values)[0]));
    CHECK(to_vector<double>(m.values)[1] == 2.0);
    CHECK(std::isnan(to_vector<double>(amax(d))[0]));
    CHECK(std::isnan(to_vector<double>(amin(d, {1}))[0]));
  }
}

TEST_CASE("cuda: reductions over long rows split across blocks", "[gpu]") {
  if (no_gpu()) return;
  const int64_t n = 300000;
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::UInt8}) {
    INFO(dname(dt));
    const Tensor a = sample(dt, {n}, 13);
    const Tensor d = a.cuda();
    // Sums of 16-bit floats round the total once; the accumulation order differs from the CPU's.
    const double scale = is_floating(dt) && element_size(dt) == 2 ? 10.0 : 1.0;
    check_matches(sum(d), sum(a), scale);
    check_matches(sum(d.view({3, n / 3}), {1}), sum(a.view({3, n / 3}), {1}), scale);
    check_matches(amax(d), amax(a));
    check_matches(amin(d.view({2, n / 2}), {1}), amin(a.view({2, n / 2}), {1}));
    check_matches(any(d), any(a));
    check_matches(all(d), all(a));
    if (is_floating(dt)) check_matches(norm(d), norm(a), scale);
  }
  // A unique maximum, then a tie for it further on: the first index wins.
  std::vector<float> v(static_cast<size_t>(n), 0.0f);
  v[70001] = 9.0f;
  v[250000] = 9.0f;
  v[123] = -4.0f;
  v[299999] = -4.0f;
  const Tensor t = from_vector(v).cuda();
  CHECK(argmax(t).item<int64_t>() == 70001);
  CHECK(argmin(t).item<int64_t>() == 123);
  CHECK(max(t).item<double>() == 9.0);
  v[200000] = std::nanf("");
  const Tensor with_nan = from_vector(v).cuda();
  CHECK(argmax(with_nan).item<int64_t>() == 200000);
  CHECK(std::isnan(amax(with_nan).item<double>()));
  CHECK(std::isnan(sum(with_nan).item<double>()));
}

TEST_CASE("cuda: empty and 0-dim tensors", "[gpu]") {
  if (no_gpu()) return;
  const Tensor e = zeros({0, 3}, TensorOptions(DType::Float32, kGpu));
  CHECK((e + e).shape() == Shape{0, 3});
  CHECK(exp(e).shape() == Shape{0, 3});
  check_matches(sum(e, {0}), sum(e.cpu(), {0}));
  check_matches(prod(e, {0}), prod(e.cpu(), {0}));
  const Tensor s = scalar_tensor(2.5, TensorOptions(DType::Float32, kGpu));
  CHECK((s + scalar_tensor(1.5, TensorOptions(DType::Float32, kGpu))).item<double>() == 4.0);
  CHECK(sum(s).item<double>() == 2.5);
  CHECK(argmax(s).item<int64_t>() == 0);
}

TEST_CASE("cuda: the caching allocator hands freed blocks out again", "[gpu]") {
  if (no_gpu()) return;
  void* first = nullptr;
  {
    const Tensor t = Tensor::empty({1000}, TensorOptions(DType::Float32, kGpu));  // 4000 bytes, rounded
    first = t.data_ptr();
  }
  // The same rounded size (1020 floats: 4080 bytes) gets the block just freed.
  const Tensor again = Tensor::empty({1020}, TensorOptions(DType::Float32, kGpu));
  CHECK(again.data_ptr() == first);
  // A block in use is not handed out twice.
  const Tensor other = Tensor::empty({1000}, TensorOptions(DType::Float32, kGpu));
  CHECK(other.data_ptr() != again.data_ptr());
  // Reused memory works like fresh memory.
  again.fill_(1.0);
  CHECK(sum(again).item<double>() == 1020.0);
}

TEST_CASE("cuda: tensors on a second device", "[gpu]") {
  if (no_gpu()) return;
  if (cuda::device_count() < 2) {
    WARN("skipped: needs 2 CUDA devices, found " << cuda::device_count());
    return;
  }
  const Device d1 = Device::cuda(1);
  const Tensor a = sample(DType::Float32, {4, 5}, 14);
  const Tensor x = a.to(d1);
  CHECK(x.device() == d1);
  check_matches(exp(x) + x, exp(a) + a);
  check_matches(sum(x, {1}), sum(a, {1}));
  CHECK(same_bytes(x.to(kGpu), a));  // device to device
  CHECK(same_bytes(x.t().to(kGpu), a.t()));
}

}  // namespace
}  // namespace braid
