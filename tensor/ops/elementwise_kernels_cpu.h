// CPU kernels behind the elementwise front ends (ops/elementwise.cc). The front ends have already checked
// arguments, chosen dtypes and allocated `out`; inputs may be any strided views that broadcast to out's
// shape (zero strides are fine), and `out` must not partially overlap an input.
#pragma once

#include <optional>

#include "tensor/ops/op_kinds.h"
#include "tensor/tensor.h"

namespace braid::detail {

// out <- op(a, b). `a` has the compute dtype. `b` has the compute dtype too, except that a scalar operand
// of a float16/bfloat16 op may come as a float32 tensor so that the scalar is not rounded to 16 bits
// before the arithmetic (PyTorch keeps wrapped scalars in the op's math type). `out` has the compute
// dtype, or bool for comparisons and logical ops. `alpha` scales b for Add/Sub.
void cpu_binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha);

// out <- op(a). out has a's dtype, except LogicalNot whose out is bool (a may have any dtype).
void cpu_unary(UnaryOp op, const Tensor& out, const Tensor& a);

// out <- cond ? a : b; cond is bool, a/b/out share one dtype.
void cpu_where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);

// out <- min(max(a, lo), hi) with NaN propagating from a; out and a share one dtype. Bounds that are
// NaN are handled by the front end.
void cpu_clamp(const Tensor& out, const Tensor& a, std::optional<Scalar> lo, std::optional<Scalar> hi);

}  // namespace braid::detail
