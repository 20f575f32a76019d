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
// result dtype; alpha scales b for Add/Sub.
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha);
// out <- op(a); out and a have the same dtype (the front end converts integers first where needed).
void unary(UnaryOp op, const Tensor& out, const Tensor& a);
// out <- cond ? a : b (cond bool; a, b, out one dtype).
void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
// Reduces the last dimension of the contiguous 2-D `in` [rows, n] into `out` [rows] (contiguous).
// Sum/Prod/NormP accumulate in float for 16-bit floats; `p` is used by NormP.
void reduce_rows(ReduceKind kind, const Tensor& out, const Tensor& in, double p);
// Index of the max (or min) of each row of the contiguous 2-D `in`; out is int64 [rows].
void arg_reduce_rows(bool is_max, const Tensor& out, const Tensor& in);

}  // namespace braid::cuda
