// Matrix products. float32 and float64 run through OpenBLAS (cblas_?gemm; transposed operands are passed
// as transposes, not copied); other dtypes use a straightforward loop with 16-bit floats accumulated in
// float32. Errors name the op and both operands' shapes and dtypes.
#pragma once

#include "tensor/tensor.h"

namespace braid {

// [n, k] x [k, m] -> [n, m]
Tensor mm(const Tensor& a, const Tensor& b);
// Writes a x b into `out` ([n, m], same dtype); no allocation.
const Tensor& mm_out(const Tensor& out, const Tensor& a, const Tensor& b);
// [B, n, k] x [B, k, m] -> [B, n, m]
Tensor bmm(const Tensor& a, const Tensor& b);
// [k] . [k] -> 0-dim
Tensor dot(const Tensor& a, const Tensor& b);
// [n, k] x [k] -> [n]
Tensor mv(const Tensor& a, const Tensor& v);
// torch.matmul semantics: 1-D/2-D cases, and batched with broadcast batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace braid
