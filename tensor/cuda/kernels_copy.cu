// Launchers that move elements: copy (with dtype conversion), fill and where. See launch.h.
#include "tensor/cuda/kernels_common.cuh"

namespace braid::cuda::launch {
namespace kern {
namespace {

template <class D, class S>
struct ConvertFn {
  D* dst;
  const S* src;
  __device__ __forceinline__ void operator()(const int64_t (&off)[2]) const { dst[off[0]] = convert<D>(src[off[1]]); }
};

template <class B>
struct FillFn {
  B* dst;
  B value;
  __device__ __forceinline__ void operator()(const int64_t (&off)[1]) const { dst[off[0]] = value; }
};

template <class B>
struct WhereFn {
  B* out;
  const bool* cond;
  const B* a;
  const B* b;
  __device__ __forceinline__ void operator()(const int64_t (&off)[4]) const {
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
};

// The fill value as the bits of one element of dtype T, converted as Scalar::to<T>() does on the CPU.
template <class T>
uint64_t fill_bits(KernelScalar v) {
  T x;
  if constexpr (std::is_same_v<T, bool>) {
    x = v.d != 0.0;  // .d is exact for every non-zero integer scalar too, and 0.5 must fill true
  } else if constexpr (kIsFloating<T>) {
    x = T(static_cast<Math<T>>(v.d));
  } else {
    x = static_cast<T>(v.i);
  }
  Bits<sizeof(T)> bits;
  static_assert(sizeof(bits) == sizeof(x));
  std::memcpy(&bits, &x, sizeof(x));
  return bits;
}

}  // namespace
}  // namespace kern

const char* copy(const KernelTensor& dst, const KernelTensor& src) {
  using namespace kern;
  if (!valid_dtype(dst.dtype) || !valid_dtype(src.dtype)) return kBadDType;
  Indexer<2> ix;
  int64_t n = 0;
  if (const char* err = make_indexer<2>({&dst, &src}, ix, n)) return err;
  if (n == 0) return nullptr;
  DeviceGuard guard(dst.data);
  const char* err = nullptr;
  if (dst.dtype == src.dtype) {
    if (ix.dense) {
      const cudaError_t e = cudaMemcpyAsync(dst.data, src.data, static_cast<size_t>(n) * element_bytes(dst.dtype),
                                            cudaMemcpyDeviceToDevice, 0);
      err = launch_error();  // also clears e from the error state
      if (e != cudaSuccess) err = cudaGetErrorString(e);
    } else {
      // Same dtype: move raw bits (keeps NaN payloads, one kernel per element size).
      err = dispatch_bits(dst.dtype, [&](auto tag) {
        using B = typename decltype(tag)::type;
        return launch_elementwise(ix, n, ConvertFn<B, B>{static_cast<B*>(dst.data), static_cast<const B*>(src.data)});
      });
    }
  } else {
    err = dispatch_dtype(dst.dtype, [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      return dispatch_dtype(src.dtype, [&](auto stag) {
        using S = typename decltype(stag)::type;
        if constexpr (std::is_same_v<D, S>) {
          return kBadDType;  // unreachable: equal dtypes take the raw-bits path above
        } else {
          return launch_elementwise(ix, n, ConvertFn<D, S>{static_cast<D*>(dst.data), static_cast<const S*>(src.data)});
        }
      });
    });
  }
  return finish(err);
}

const char* fill(const KernelTensor& dst, KernelScalar value) {
  using namespace kern;
  Indexer<1> ix;
  int64_t n = 0;
  if (const char* err = make_indexer<1>({&dst}, ix, n)) return err;
  if (!valid_dtype(dst.dtype)) return kBadDType;
  if (n == 0) return nullptr;
  uint64_t bits = 0;
  (void)dispatch_dtype(dst.dtype, [&](auto tag) -> const char* {
    bits = fill_bits<typename decltype(tag)::type>(value);
    return nullptr;
  });
  DeviceGuard guard(dst.data);
  const char* err = dispatch_bits(dst.dtype, [&](auto tag) {
    using B = typename decltype(tag)::type;
    return launch_elementwise(ix, n, FillFn<B>{static_cast<B*>(dst.data), static_cast<B>(bits)});
  });
  return finish(err);
}

const char* where(const KernelTensor& out, const KernelTensor& cond, const KernelTensor& a,
                  const KernelTensor& b) {
  using namespace kern;
  if (cond.dtype != kBool) return "where: condition must be bool";
  if (a.dtype != out.dtype || b.dtype != out.dtype) return "where: a, b and out must have one dtype";
  Indexer<4> ix;
  int64_t n = 0;
  if (const char* err = make_indexer<4>({&out, &cond, &a, &b}, ix, n)) return err;
  if (n == 0) return nullptr;
  DeviceGuard guard(out.data);
  const char* err = dispatch_bits(out.dtype, [&](auto tag) {
    using B = typename decltype(tag)::type;
    return launch_elementwise(ix, n, WhereFn<B>{static_cast<B*>(out.data), static_cast<const bool*>(cond.data),
                                                static_cast<const B*>(a.data), static_cast<const B*>(b.data)});
  });
  return finish(err);
}

}  // namespace braid::cuda::launch
