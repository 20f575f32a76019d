// Helpers for writing the conformance tests' expectations: small tensors from values, the closed forms of
// torch's _basics expectations (factorials, OR and XOR over ranges), and a Catch2 matcher that compares dtype, shape and values
// and prints both tensors when they differ.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tensor/print.h"
#include "tensor/tensor.h"

namespace braid::mp {

// A 1-D tensor of `values` (exact: integers go through int64, so narrowing to int8/uint8 wraps).
inline Tensor ints(const std::vector<int64_t>& values, DType dtype = DType::Int64) {
  return from_vector<int64_t>(values, {static_cast<int64_t>(values.size())}).to(dtype);
}
inline Tensor floats(const std::vector<double>& values, DType dtype = DType::Float32) {
  return from_vector<double>(values, {static_cast<int64_t>(values.size())}).to(dtype);
}
// A one-element tensor, as torch's tests write torch.tensor([v]).
inline Tensor scalar1(double v, DType dtype = DType::Float32) {
  return is_floating(dtype) ? floats({v}, dtype) : ints({static_cast<int64_t>(v)}, dtype);
}

// n! as an exact integer (n <= 20).
inline int64_t factorial(int64_t n) {
  int64_t f = 1;
  for (int64_t i = 2; i <= n; ++i) f *= i;
  return f;
}
// OR and XOR of 0, 1, ..., m-1 (closed forms of the helpers torch's reduce
// tests use, computed directly).
inline int64_t or_range(int64_t m) {
  int64_t v = 0;
  for (int64_t i = 0; i < m; ++i) v |= i;
  return v;
}
inline int64_t xor_range(int64_t m) {
  int64_t v = 0;
  for (int64_t i = 0; i < m; ++i) v ^= i;
  return v;
}

// Same dtype, same shape, and equal values (floating values within `rtol`/`atol`; 0 means exact).
class TensorEquals : public Catch::MatcherBase<Tensor> {
 public:
  explicit TensorEquals(Tensor expected, double rtol = 0, double atol = 0)
      : expected_(std::move(expected)), rtol_(rtol), atol_(atol) {}
  bool match(const Tensor& got) const override {
    if (!got.defined() || got.is_sparse()) return false;
    if (got.dtype() != expected_.dtype() || got.shape() != expected_.shape()) return false;
    const Tensor g = got.cpu(), e = expected_.cpu();
    if (rtol_ == 0 && atol_ == 0) return braid::equal(g, e);
    return braid::allclose(g, e, rtol_, atol_);
  }
  std::string describe() const override {
    return "equals " + to_string(expected_) + " (" + expected_.describe() + ")" +
           (rtol_ != 0 || atol_ != 0 ? " within rtol " + std::to_string(rtol_) + ", atol " + std::to_string(atol_) : "");
  }

 private:
  Tensor expected_;
  double rtol_;
  double atol_;
};

inline TensorEquals Equals(const Tensor& expected, double rtol = 0, double atol = 0) {
  return TensorEquals(expected, rtol, atol);
}

}  // namespace braid::mp

namespace Catch {
template <>
struct StringMaker<braid::Tensor> {
  static std::string convert(const braid::Tensor& t) {
    if (!t.defined()) return "(undefined tensor)";
    if (t.is_sparse()) return t.describe() + " (sparse)";
    return braid::to_string(t.cpu()) + " (" + t.describe() + ")";
  }
};
}  // namespace Catch
