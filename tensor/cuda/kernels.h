// CUDA kernels behind the tensor ops. The front ends in tensor/ops/*.cc check arguments, compute result
// dtypes and shapes, convert inputs to the compute dtype and allocate outputs; these functions only run
// the arithmetic on one CUDA device. Every tensor argument is on the same CUDA device; inputs are already
// expanded (broadcast) to the output's shape. Synchronous with respect to the host (for now).
// In a build without CUDA they throw InvalidArgument saying so.
#pragma once

#include "tensor/ops/op_kinds.h"
#include "tensor/tensor.h"

namespace braid::cuda {

// dst <- src with dtype conversion; any layouts.
void copy_strided(const Tensor& dst, const Tensor& src);
void fill(const Tensor& dst, Scalar value);
// out <- op(a, b); a and b have the compute dtype (for comparisons: the promoted input dtype), out the
// result dtype (bool for comparisons and logical ops); alpha scales b for Add/Sub. For Add/Sub/Mul/Div/Pow
// on float16/bfloat16, b may instead be float32 (a scalar operand kept unrounded, as the CPU kernels do).
// Integer arithmetic wraps; Div needs floats; bitwise ops need integral or bool operands.
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha);
// out <- op(a); out and a have the same dtype (the front end converts integers first where needed), except
// LogicalNot, whose out is bool and whose a may have any dtype.
void unary(UnaryOp op, const Tensor& out, const Tensor& a);
// out <- cond ? a : b (cond bool; a, b, out one dtype).
void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
// Reduces the last dimension of the contiguous 2-D `in` [rows, n] into `out` [rows] (contiguous), converting
// to out's dtype. Accumulators as on the CPU: Sum/NormP in float for 16-bit floats and in double for
// float32/float64, integers and bool in int64 (wrapping); Max/Min propagate NaN; `p` is used by NormP.
void reduce_rows(ReduceKind kind, const Tensor& out, const Tensor& in, double p);
// Index of the max (or min) of each row of the contiguous 2-D `in`; out is int64 [rows]. Ties give the
// first index; the first NaN wins for both argmax and argmin (matching the propagated NaN of max/min).
void arg_reduce_rows(bool is_max, const Tensor& out, const Tensor& in);
// c <- a x b for 2-D views of one floating dtype (float32, float64, float16, bfloat16) through cuBLAS
// (blas.cc); shapes already checked, c does not alias a or b unless it is replaced by a temporary.
void gemm(const Tensor& c, const Tensor& a, const Tensor& b);
// Indexing along `dim` with index values already checked on the host; index int64 or int32 on the
// device. out <- a[index] along dim: out has index's shape (gather) or a's with index.numel() at dim
// (index_select, index 1-D). scatter_add: self[index] += src along dim, over index's shape.
void gather(const Tensor& out, const Tensor& a, int64_t dim, const Tensor& index);
void index_select(const Tensor& out, const Tensor& a, int64_t dim, const Tensor& index);
void scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

// embedding_bag's forward and weight gradient (launch.h EmbeddingBagArgs): weight contiguous [V, D] of a
// floating dtype; input and offsets int64 on the device; per_sample_weights of the weight's dtype or
// undefined; mode 0 sum, 1 mean, 2 max. out [B, D]; argmax [B, D] int64 for max. grad_weight is zeroed
// [V, D].
void embedding_bag(const Tensor& out, const Tensor& argmax, const Tensor& weight, const Tensor& input,
                   const Tensor& offsets, const Tensor& per_sample_weights, int mode);
void embedding_bag_backward(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& argmax,
                            const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights, int mode);

}  // namespace braid::cuda
