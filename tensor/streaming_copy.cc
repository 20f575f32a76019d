#include "tensor/streaming_copy.h"

#include <cstdint>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace braid {
namespace {

template <class T>
void scaled_loop(T* dst, const T* src, int64_t n, T scale) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i] * scale;
}

#if defined(__SSE2__)
// SSE2 is part of x86-64 itself, so this needs no CPU check. Head and tail elements around the 16-byte
// aligned middle use ordinary stores; the fence orders the streaming stores before what follows (another
// thread, such as a communication engine's, may read the destination next).
template <class T>
void stream_scaled(T* dst, const T* src, int64_t n, T scale) {
  constexpr int64_t kLanes = 16 / sizeof(T);
  int64_t i = 0;
  for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 15) != 0; ++i) dst[i] = src[i] * scale;
  if constexpr (std::is_same_v<T, float>) {
    const __m128 s = _mm_set1_ps(scale);
    for (; i + kLanes <= n; i += kLanes) _mm_stream_ps(dst + i, _mm_mul_ps(_mm_loadu_ps(src + i), s));
  } else {
    const __m128d s = _mm_set1_pd(scale);
    for (; i + kLanes <= n; i += kLanes) _mm_stream_pd(dst + i, _mm_mul_pd(_mm_loadu_pd(src + i), s));
  }
  scaled_loop(dst + i, src + i, n - i, scale);
  _mm_sfence();
}
#else
template <class T>
void stream_scaled(T* dst, const T* src, int64_t n, T scale) {
  scaled_loop(dst, src, n, scale);
}
#endif

}  // namespace

void copy_scaled_streaming(const Tensor& dst, const Tensor& src, double scale) {
  const bool direct = dst.device().is_cpu() && src.device().is_cpu() && dst.dtype() == src.dtype() &&
                      dst.is_contiguous() && src.is_contiguous() && dst.shape() == src.shape();
  if (direct && dst.dtype() == DType::Float32) {
    return stream_scaled(dst.data<float>(), src.data<float>(), dst.numel(), static_cast<float>(scale));
  }
  if (direct && dst.dtype() == DType::Float64) {
    return stream_scaled(dst.data<double>(), src.data<double>(), dst.numel(), scale);
  }
  dst.copy_(src);
  if (scale != 1.0) dst.mul_(scale);
}

}  // namespace braid
