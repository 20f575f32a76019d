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

}  // namespace braid::cuda::launch
