// allclose and equal: whole-tensor comparisons, computed on the CPU.
#include "tensor/compare.h"

#include <cmath>

#include "tensor/complex.h"
#include "tensor/loop.h"
#include "tensor/ops/elementwise.h"

namespace braid {
namespace {

// PyTorch's isclose for one pair: equal values (infinities included) are close, NaN only with equal_nan,
// any other non-finite value never is.
bool close(double x, double y, double rtol, double atol, bool equal_nan) {
  if (x == y) return true;
  if (std::isnan(x) || std::isnan(y)) return equal_nan && std::isnan(x) && std::isnan(y);
  if (std::isinf(x) || std::isinf(y)) return false;
  return std::abs(x - y) <= atol + rtol * std::abs(y);
}

}  // namespace

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  BRAID_CHECK_ARG(a.defined() && b.defined(), "allclose: an operand is an undefined tensor");
  BRAID_CHECK_ARG(rtol >= 0 && atol >= 0, "allclose: rtol ({}) and atol ({}) must be non-negative (operands {} and {})",
                  rtol, atol, a.describe(), b.describe());
  if (is_complex(a.dtype()) || is_complex(b.dtype())) {
    // Complex operands compare part by part (each part within tolerance), a slightly stricter test than
    // torch's |a - b| <= atol + rtol * |b| on the complex magnitude.
    const DType c = promote_types(a.dtype(), b.dtype());
    return allclose(view_as_real(a.to(c)), view_as_real(b.to(c)), rtol, atol, equal_nan);
  }
  const Shape shape = detail::broadcast_shapes(a.shape(), b.shape(), "allclose", &a, &b);
  const Tensor x = a.cpu().to(DType::Float64);
  const Tensor y = b.cpu().to(DType::Float64);
  bool ok = true;
  const auto rows = detail::rows_for<2>(shape, {&x, &y});
  detail::for_each_row(rows, [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
    const char* px = p[0];
    const char* py = p[1];
    for (int64_t i = 0; i < n && ok; ++i, px += s[0], py += s[1]) {
      ok = close(*reinterpret_cast<const double*>(px), *reinterpret_cast<const double*>(py), rtol, atol, equal_nan);
    }
  });
  return ok;
}

bool equal(const Tensor& a, const Tensor& b) {
  BRAID_CHECK_ARG(a.defined() && b.defined(), "equal: an operand is an undefined tensor");
  if (a.shape() != b.shape()) return false;
  // ne() promotes both operands, so values compare as PyTorch would after type promotion.
  const Tensor diff = ne(a.cpu(), b.cpu());
  const bool* d = diff.data<bool>();
  for (int64_t i = 0; i < diff.numel(); ++i) {
    if (d[i]) return false;
  }
  return true;
}

}  // namespace braid
