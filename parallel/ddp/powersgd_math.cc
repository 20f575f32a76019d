#include "parallel/ddp/powersgd_math.h"

#include <atomic>

#include "base/logging.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/linalg.h"
#include "tensor/ops/reduce.h"

namespace braid::parallel {

// PyTorch's _orthogonalize_gram_schmidt: the columns of `m` [rows, cols] made orthonormal in place, each
// normalized and then projected out of the columns after it.
void powersgd_orthogonalize(const Tensor& m, double epsilon) {
  const int64_t cols = m.size(1);
  for (int64_t i = 0; i < cols; ++i) {
    const Tensor col = m.narrow(1, i, 1);
    const Tensor col_norm = norm(col);
    if (epsilon != 0) {
      binary_(BinaryOp::Div, col, add(col_norm, Scalar(epsilon)));
    } else if (col_norm.item<double>() == 0) {
      // PyTorch's intent for this case (its ZeroDivisionError branch); its tensor division gives NaNs.
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true)) {
        logging::get("braid.ddp")->warn(
            "PowerSGD: the matrix to be orthogonalized has a column of all 0s; it stays 0. Set a small "
            "orthogonalization_epsilon (such as 1e-8) if this is not expected.");
      }
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

}  // namespace braid::parallel
