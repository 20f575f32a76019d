// Shared machinery of the nvcc-compiled launchers (kernels_copy.cu, kernels_elementwise.cu,
// kernels_reduce.cu): dtype dispatch, element conversion matching the CPU (tensor/copy.cc), strided
// indexing with dimension coalescing, the generic elementwise kernel, and launch/error helpers.
// Private to tensor/cuda: include only from those .cu files.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensor/cuda/launch.h"
#include "tensor/half.h"

namespace braid::cuda::launch::kern {

using namespace dtype_code;

inline constexpr int kThreads = 256;
// Grid-stride loops make any grid size correct; beyond a few waves of the largest GPU more blocks only
// add scheduling overhead.
inline constexpr int64_t kMaxBlocks = 8192;

inline constexpr const char* kBadDType = "unknown dtype code";
inline constexpr const char* kShapeMismatch = "operands do not all have the output's shape";

// --- element types

template <class T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) with the C++ element type of a dtype code; f returns const char*.
template <class F>
const char* dispatch_dtype(int dtype, F&& f) {
  switch (dtype) {
    case kBool: return f(TypeTag<bool>{});
    case kUInt8: return f(TypeTag<uint8_t>{});
    case kInt8: return f(TypeTag<int8_t>{});
    case kInt32: return f(TypeTag<int32_t>{});
    case kInt64: return f(TypeTag<int64_t>{});
    case kFloat16: return f(TypeTag<Half>{});
    case kBFloat16: return f(TypeTag<BFloat16>{});
    case kFloat32: return f(TypeTag<float>{});
    case kFloat64: return f(TypeTag<double>{});
    default: return kBadDType;
  }
}

template <class T>
constexpr int code_of() {
  if constexpr (std::is_same_v<T, bool>) return kBool;
  else if constexpr (std::is_same_v<T, uint8_t>) return kUInt8;
  else if constexpr (std::is_same_v<T, int8_t>) return kInt8;
  else if constexpr (std::is_same_v<T, int32_t>) return kInt32;
  else if constexpr (std::is_same_v<T, int64_t>) return kInt64;
  else if constexpr (std::is_same_v<T, Half>) return kFloat16;
  else if constexpr (std::is_same_v<T, BFloat16>) return kBFloat16;
  else if constexpr (std::is_same_v<T, float>) return kFloat32;
  else return kFloat64;
}

template <class T>
inline constexpr bool kIsHalfLike = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T>
inline constexpr bool kIsFloating = kIsHalfLike<T> || std::is_floating_point_v<T>;
template <class T>
inline constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// The type arithmetic on T is carried out in (as braid::opmath_t): float for the 16-bit floats.
template <class T>
using Math = std::conditional_t<kIsHalfLike<T>, float, T>;

// dst <- src converted exactly as the CPU copy does: to bool is != 0, 16-bit floats round once from
// float (round to nearest even, in the Half/BFloat16 constructors), everything else a static_cast of the
// source's math value.
template <class D, class S>
__host__ __device__ __forceinline__ D convert(S v) {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else if constexpr (std::is_same_v<D, bool>) {
    return static_cast<Math<S>>(v) != Math<S>(0);
  } else if constexpr (kIsHalfLike<D>) {
    return D(static_cast<float>(static_cast<Math<S>>(v)));
  } else {
    return static_cast<D>(static_cast<Math<S>>(v));
  }
}

// Math functions overloaded on the math type, so that float math stays in single precision.
__device__ __forceinline__ float m_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double m_pow(double a, double b) { return pow(a, b); }
__device__ __forceinline__ float m_exp(float x) { return expf(x); }
__device__ __forceinline__ double m_exp(double x) { return exp(x); }
__device__ __forceinline__ float m_log(float x) { return logf(x); }
__device__ __forceinline__ double m_log(double x) { return log(x); }
__device__ __forceinline__ float m_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double m_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float m_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double m_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float m_erf(float x) { return erff(x); }
__device__ __forceinline__ double m_erf(double x) { return erf(x); }
__device__ __forceinline__ float m_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double m_abs(double x) { return fabs(x); }

// Writes v converted to the dtype `dtype` at element i of `base`. For per-row results (reductions) a
// runtime switch is cheaper to compile than one kernel per output dtype, and costs nothing at run time.
template <class V>
__device__ __forceinline__ void store_as(void* base, int dtype, int64_t i, V v) {
  switch (dtype) {
    case kBool: static_cast<bool*>(base)[i] = convert<bool>(v); break;
    case kUInt8: static_cast<uint8_t*>(base)[i] = convert<uint8_t>(v); break;
    case kInt8: static_cast<int8_t*>(base)[i] = convert<int8_t>(v); break;
    case kInt32: static_cast<int32_t*>(base)[i] = convert<int32_t>(v); break;
    case kInt64: static_cast<int64_t*>(base)[i] = convert<int64_t>(v); break;
    case kFloat16: static_cast<Half*>(base)[i] = convert<Half>(v); break;
    case kBFloat16: static_cast<BFloat16*>(base)[i] = convert<BFloat16>(v); break;
    case kFloat32: static_cast<float*>(base)[i] = convert<float>(v); break;
    case kFloat64: static_cast<double*>(base)[i] = convert<double>(v); break;
    default: break;
  }
}

inline bool valid_dtype(int dtype) { return dtype >= kBool && dtype <= kFloat64; }

// An unsigned integer type of the same size, for moving elements as raw bits.
template <int kBytes>
using Bits = std::conditional_t<
    kBytes == 1, uint8_t,
    std::conditional_t<kBytes == 2, uint16_t, std::conditional_t<kBytes == 4, uint32_t, uint64_t>>>;

inline int element_bytes(int dtype) {
  switch (dtype) {
    case kBool: case kUInt8: case kInt8: return 1;
    case kFloat16: case kBFloat16: return 2;
    case kInt32: case kFloat32: return 4;
    default: return 8;
  }
}

// Calls f(TypeTag<Bits<size>>{}) for an element size of 1, 2, 4 or 8 bytes: ops that only move elements
// (same-dtype copy, fill, where) need one kernel per size, not per dtype.
template <class F>
const char* dispatch_bits(int dtype, F&& f) {
  if (!valid_dtype(dtype)) return kBadDType;
  switch (element_bytes(dtype)) {
    case 1: return f(TypeTag<uint8_t>{});
    case 2: return f(TypeTag<uint16_t>{});
    case 4: return f(TypeTag<uint32_t>{});
    default: return f(TypeTag<uint64_t>{});
  }
}

// --- strided indexing

// The iteration space of N operands of one shape, after coalescing: size-1 dims are dropped and
// neighbouring dims merged wherever every operand's strides allow, innermost first. Most real layouts
// (contiguous, expanded scalars, transposes of contiguous blocks) end up with 1-3 dims, which keeps the
// index arithmetic per element small.
template <int N>
struct Indexer {
  int ndim = 0;
  bool dense = true;  // every operand is one dense run: offsets equal the linear index
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  __host__ __device__ __forceinline__ void offsets(int64_t linear, int64_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    uint64_t rem = static_cast<uint64_t>(linear);
    // Not unrolled: unrolling kMaxDims steps multiplies every kernel's code (and nvcc's time) by 12 for
    // the 1-3 dims that remain after coalescing.
#pragma unroll 1
    for (int d = 0; d < ndim; ++d) {
      const uint64_t size = static_cast<uint64_t>(sizes[d]);
      uint64_t idx;
      // 64-bit division is a long software sequence on GPUs; nearly all indices fit 32 bits.
      if (((rem | size) >> 32) == 0) {
        const uint32_t r32 = static_cast<uint32_t>(rem), s32 = static_cast<uint32_t>(size);
        idx = r32 % s32;
        rem = r32 / s32;
      } else {
        idx = rem % size;
        rem = rem / size;
      }
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += static_cast<int64_t>(idx) * strides[k][d];
    }
  }
};

// Builds the indexer of operands that must all have ops[0]'s shape; numel receives the element count.
// Returns an error string when the shapes differ or have too many dims.
template <int N>
const char* make_indexer(const KernelTensor* const (&ops)[N], Indexer<N>& ix, int64_t& numel) {
  const int ndim = ops[0]->ndim;
  if (ndim < 0 || ndim > kMaxDims) return "tensor has too many dims for the CUDA kernels";
  numel = 1;
  for (int k = 0; k < N; ++k) {
    if (ops[k]->ndim != ndim) return kShapeMismatch;
    for (int d = 0; d < ndim; ++d) {
      if (ops[k]->sizes[d] != ops[0]->sizes[d]) return kShapeMismatch;
    }
  }
  for (int d = 0; d < ndim; ++d) numel *= ops[0]->sizes[d];
  int nd = 0;
  for (int d = ndim - 1; d >= 0; --d) {
    const int64_t size = ops[0]->sizes[d];
    if (size == 1) continue;
    if (nd > 0) {
      bool mergeable = true;
      for (int k = 0; k < N; ++k) {
        mergeable = mergeable && ops[k]->strides[d] == ix.strides[k][nd - 1] * ix.sizes[nd - 1];
      }
      if (mergeable) {
        ix.sizes[nd - 1] *= size;
        continue;
      }
    }
    ix.sizes[nd] = size;
    for (int k = 0; k < N; ++k) ix.strides[k][nd] = ops[k]->strides[d];
    ++nd;
  }
  ix.ndim = nd;
  ix.dense = true;
  for (int k = 0; k < N; ++k) ix.dense = ix.dense && (nd == 0 || (nd == 1 && ix.strides[k][0] == 1));
  return nullptr;
}

// Runs f(offsets) for every element; offsets are in elements, one per operand.
template <int N, class F>
__global__ void __launch_bounds__(kThreads) elementwise_kernel(Indexer<N> ix, int64_t n, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (ix.dense) {
    for (; i < n; i += step) {
      int64_t off[N];
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] = i;
      f(off);
    }
  } else {
    for (; i < n; i += step) {
      int64_t off[N];
      ix.offsets(i, off);
      f(off);
    }
  }
}

// --- launching

inline unsigned grid_for(int64_t units, int64_t units_per_block = kThreads) {
  return static_cast<unsigned>(std::min((units + units_per_block - 1) / units_per_block, kMaxBlocks));
}

// The error of the launch just made (configuration, missing kernel image), or nullptr.
inline const char* launch_error() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

// Ends a launcher: the API is synchronous with respect to the host, and asynchronous faults of the
// kernels (illegal address, ...) surface here, attributed to the op that caused them.
inline const char* finish(const char* err) {
  if (err != nullptr) {
    (void)cudaStreamSynchronize(0);  // leave no work of a failed launcher running behind the error
    return err;
  }
  const cudaError_t sync = cudaStreamSynchronize(0);
  return sync == cudaSuccess ? nullptr : cudaGetErrorString(sync);
}

template <int N, class F>
const char* launch_elementwise(const Indexer<N>& ix, int64_t n, const F& f) {
  elementwise_kernel<N, F><<<grid_for(n), kThreads, 0, 0>>>(ix, n, f);
  return launch_error();
}

// Makes the device that owns `ptr` current while a launcher runs, so that tensors on any device work
// whichever device the calling thread has selected; restores the previous device on exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(const void* ptr) {
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
      (void)cudaGetLastError();  // not a CUDA pointer: keep the current device, and no sticky error
      return;
    }
    if (attr.type != cudaMemoryTypeDevice || cudaGetDevice(&previous_) != cudaSuccess) return;
    if (attr.device != previous_ && cudaSetDevice(attr.device) == cudaSuccess) switched_ = true;
  }
  ~DeviceGuard() {
    if (switched_) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

}  // namespace braid::cuda::launch::kern
