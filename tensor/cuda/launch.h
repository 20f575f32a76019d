// The boundary between C++ (kernels.cc) and nvcc-compiled code (kernels.cu). Plain structs only: no
// Tensor, no fmt, no exceptions across it. Each launch returns nullptr on success or a static error string.
#pragma once

#include <cstdint>

#include "tensor/ops/op_kinds.h"

namespace braid::cuda::launch {

inline constexpr int kMaxDims = 12;

// The DType values (tensor/dtype.h) that kernels receive as `int dtype`: nvcc code cannot include dtype.h
// (it pulls in fmt), so the numbers are repeated here and kernels.cc asserts that they agree.
namespace dtype_code {
inline constexpr int kBool = 0;
inline constexpr int kUInt8 = 1;
inline constexpr int kInt8 = 2;
inline constexpr int kInt32 = 3;
inline constexpr int kInt64 = 4;
inline constexpr int kFloat16 = 5;
inline constexpr int kBFloat16 = 6;
inline constexpr int kFloat32 = 7;
inline constexpr int kFloat64 = 8;
}  // namespace dtype_code

// One operand: its data pointer, dtype (DType value), and geometry in elements.
struct KernelTensor {
  void* data = nullptr;
  int dtype = 0;
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
};

// A scalar as both representations; kernels pick by dtype.
struct KernelScalar {
  double d = 0;
  int64_t i = 0;
};

// Every operand has the output's sizes (inputs already expanded); strides may be anything, including 0.
// The kernels run on the device that owns the output's memory; each launcher returns after its kernels
// finished (errors of the kernels themselves surface in its return value). kernels.h states the dtypes.
const char* copy(const KernelTensor& dst, const KernelTensor& src);
const char* fill(const KernelTensor& dst, KernelScalar value);
const char* binary(BinaryOp op, const KernelTensor& out, const KernelTensor& a, const KernelTensor& b,
                   KernelScalar alpha);
const char* unary(UnaryOp op, const KernelTensor& out, const KernelTensor& a);
const char* where(const KernelTensor& out, const KernelTensor& cond, const KernelTensor& a,
                  const KernelTensor& b);
// in: contiguous [rows, n]; out: contiguous [rows].
const char* reduce_rows(ReduceKind kind, const KernelTensor& out, const KernelTensor& in, int64_t rows,
                        int64_t n, double p);
const char* arg_reduce_rows(bool is_max, const KernelTensor& out, const KernelTensor& in, int64_t rows,
                            int64_t n);

// Indexing. Every operand is viewed over the index's sizes: `a` (or `self`) with a stride of 0 along the
// indexed dim, whose offset the index supplies, `step` elements per index unit. Index values were checked on
// the host. gather (which index_select and embedding use): out[o] = a[a_off + index[i] * step].
const char* gather(const KernelTensor& out, const KernelTensor& index, const KernelTensor& a, int64_t step);
// self[s_off + index[i] * step] += src[...], atomically: duplicate indices add up (floats in any order).
const char* scatter_add(const KernelTensor& self, const KernelTensor& index, const KernelTensor& src, int64_t step);

// embedding_bag over a contiguous weight [V, dim] of a floating dtype; input [n] and offsets [nbags] are
// int64 on the device (checked on the host), per_sample_weights [n] of the weight's dtype or null.
struct EmbeddingBagArgs {
  const void* weight = nullptr;
  int dtype = 0;
  int64_t dim = 0;
  const int64_t* input = nullptr;
  const int64_t* offsets = nullptr;
  int64_t nbags = 0;
  int64_t n = 0;
  const void* per_sample_weights = nullptr;
  int mode = 0;  // 0 sum, 1 mean, 2 max
};
// out [nbags, dim] (every element written; an empty bag gives 0); argmax [nbags, dim] for max (-1 for an
// empty bag), else null.
const char* embedding_bag(const EmbeddingBagArgs& a, void* out, int64_t* argmax);
// grad_weight [V, dim], zeroed by the caller, += the weight's gradient from grad_out [nbags, dim].
const char* embedding_bag_backward(const EmbeddingBagArgs& a, const void* grad_out, const int64_t* argmax,
                                   void* grad_weight);

}  // namespace braid::cuda::launch
