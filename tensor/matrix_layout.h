// How a BLAS (OpenBLAS on the CPU, cuBLAS on CUDA) can read a 2-D strided view in place: with its rows
// contiguous (row-major, leading dimension = the row stride) or its columns contiguous (the transpose of a
// row-major matrix, leading dimension = the column stride). Size-1 dims carry arbitrary strides, so they
// do not constrain. nullopt: neither (a copy is needed), or a leading dimension beyond 2^31-1.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <utility>

#include "base/check.h"
#include "tensor/tensor.h"

namespace braid {

struct MatrixLayout {
  bool transposed;  // columns contiguous: the memory holds the transpose, row-major
  int64_t ld;
};

inline std::optional<MatrixLayout> matrix_layout(const Tensor& m) {
  const int64_t r = m.size(0), c = m.size(1), sr = m.stride(0), sc = m.stride(1);
  if ((c == 1 || sc == 1) && (r == 1 || sr >= std::max<int64_t>(c, 1))) {
    const int64_t ld = r == 1 ? std::max<int64_t>(c, 1) : sr;
    if (ld <= INT_MAX) return MatrixLayout{false, ld};
  } else if ((r == 1 || sr == 1) && (c == 1 || sc >= std::max<int64_t>(r, 1))) {
    const int64_t ld = c == 1 ? std::max<int64_t>(r, 1) : sc;
    if (ld <= INT_MAX) return MatrixLayout{true, ld};
  }
  return std::nullopt;
}

// An operand a BLAS can read: the view itself when it has a layout, else a contiguous copy of it.
struct BlasOperand {
  Tensor tensor;
  MatrixLayout layout;
};

inline BlasOperand blas_operand(const Tensor& m) {
  if (const auto l = matrix_layout(m)) return {m, *l};
  Tensor c = m.contiguous();
  const auto l = matrix_layout(c);
  BRAID_ASSERT(l.has_value(), "no BLAS layout for the contiguous copy of {}", m.describe());
  return {std::move(c), *l};
}

}  // namespace braid
