#include "parallel/ddp/powersgd_math.h"

#include <atomic>
#include <cmath>
#include <vector>

#include "base/logging.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/linalg.h"
#include "tensor/ops/reduce.h"

namespace braid::parallel {

namespace {

void warn_zero_column() {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    logging::get("braid.ddp")->warn(
        "PowerSGD: the matrix to be orthogonalized has a column of all 0s; it stays 0. Set a small "
        "orthogonalization_epsilon (such as 1e-8) if this is not expected.");
  }
}

// One sweep of modified Gram-Schmidt: each column normalized, then projected out of the columns after it.
// With `dependent_below` > 0, a column whose residual has shrunk below that fraction of its norm at the
// start of the sweep lies in the span of the columns before it (to rounding): it becomes zeros rather
// than normalized noise.
void gram_schmidt_sweep(const Tensor& m, double epsilon, double dependent_below) {
  const int64_t cols = m.size(1);
  std::vector<double> start_norm;
  if (dependent_below > 0) {
    for (int64_t i = 0; i < cols; ++i) start_norm.push_back(norm(m.narrow(1, i, 1)).item<double>());
  }
  for (int64_t i = 0; i < cols; ++i) {
    const Tensor col = m.narrow(1, i, 1);
    const Tensor col_norm = norm(col);
    const double n = col_norm.item<double>();
    if (dependent_below > 0 && n <= dependent_below * start_norm[static_cast<size_t>(i)]) {
      col.zero_();
    } else if (epsilon != 0) {
      binary_(BinaryOp::Div, col, add(col_norm, Scalar(epsilon)));
    } else if (n == 0) {
      // PyTorch's intent for this case (its ZeroDivisionError branch); its tensor division gives NaNs.
      warn_zero_column();
      col.zero_();
    } else {
      binary_(BinaryOp::Div, col, col_norm);
    }
    if (i + 1 < cols) {
      const Tensor rest = m.narrow(1, i + 1, cols - i - 1);
      rest.sub_(mul(sum(mul(col, rest), {0}, true), col));
    }
  }
}

double machine_epsilon(DType dtype) {
  switch (dtype) {
    case DType::Float16: return 9.765625e-4;
    case DType::BFloat16: return 7.8125e-3;
    case DType::Float32: return 1.1920929e-7;
    default: return 2.220446049250313e-16;
  }
}

}  // namespace

void powersgd_orthogonalize(const Tensor& m, double epsilon) {
  if (m.size(1) <= 2) {
    gram_schmidt_sweep(m, epsilon, 0);  // torch's single sweep
    return;
  }
  // torch orthogonalizes more than two columns by QR, which stays orthonormal when the columns are
  // dependent. Gram-Schmidt does not: a rank-deficient gradient times a wide Q gives columns whose residual
  // is rounding noise, and normalizing that noise yields columns far from orthogonal (the reconstruction
  // P P^T M then overshoots M). So such columns become zeros (P then spans exactly the gradient's columns,
  // and P P^T M is still M), and a second sweep makes the rest orthogonal to rounding ("twice is enough").
  const double dependent_below = std::sqrt(machine_epsilon(m.dtype()));
  gram_schmidt_sweep(m, epsilon, dependent_below);
  gram_schmidt_sweep(m, epsilon, dependent_below);
}

}  // namespace braid::parallel
