// Launchers that index: gather (which index_select and embedding are views of), scatter_add, and the
// bags of embedding_bag. See launch.h. Index values were checked on the host before any launch, so the
// kernels trust them.
#include "tensor/cuda/kernels_common.cuh"

namespace braid::cuda::launch {
namespace kern {
namespace {

template <class I>
__device__ __forceinline__ int64_t index_at(const I* index, int64_t off) {
  return static_cast<int64_t>(index[off]);
}

template <class B, class I>
struct GatherFn {
  B* out;
  const I* index;
  const B* a;
  int64_t step;
  __device__ __forceinline__ void operator()(const int64_t (&off)[3]) const {
    out[off[0]] = a[off[2] + index_at(index, off[1]) * step];
  }
};

// dst += v, atomically, with T's arithmetic (wrapping for integers, float math for 16-bit floats, OR for
// bool). Native atomics where the hardware has them for T's size; a compare-and-swap on the aligned
// 32-bit word that holds the element otherwise.
template <class T>
__device__ __forceinline__ T add_values(T a, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return a || v;
  } else if constexpr (kIsHalfLike<T>) {
    return T(static_cast<float>(a) + static_cast<float>(v));
  } else if constexpr (kIsInteger<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(v));
  } else {
    return a + v;
  }
}

template <class T>
__device__ __forceinline__ void atomic_add(T* dst, T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    atomicAdd(dst, v);
  } else if constexpr (sizeof(T) == 4) {
    atomicAdd(reinterpret_cast<unsigned int*>(dst), static_cast<unsigned int>(v));
  } else if constexpr (sizeof(T) == 8) {
    atomicAdd(reinterpret_cast<unsigned long long*>(dst), static_cast<unsigned long long>(v));
  } else {
    static_assert(sizeof(T) <= 2, "sub-word element expected");
    auto* word = reinterpret_cast<unsigned int*>(reinterpret_cast<uintptr_t>(dst) & ~uintptr_t{3});
    const unsigned shift = static_cast<unsigned>(reinterpret_cast<uintptr_t>(dst) & 3) * 8;
    const unsigned mask = (sizeof(T) == 1 ? 0xffu : 0xffffu) << shift;
    unsigned old = *word;
    unsigned assumed;
    do {
      assumed = old;
      Bits<sizeof(T)> bits = static_cast<Bits<sizeof(T)>>((assumed & mask) >> shift);
      T current;
      memcpy(&current, &bits, sizeof(T));
      const T sum = add_values(current, v);
      memcpy(&bits, &sum, sizeof(T));
      const unsigned next = (assumed & ~mask) | (static_cast<unsigned>(bits) << shift);
      old = atomicCAS(word, assumed, next);
    } while (old != assumed);
  }
}

template <class T, class I>
struct ScatterAddFn {
  T* self;
  const I* index;
  const T* src;
  int64_t step;
  __device__ __forceinline__ void operator()(const int64_t (&off)[3]) const {
    atomic_add(self + off[0] + index_at(index, off[1]) * step, src[off[2]]);
  }
};

// One block per bag, its threads over the embedding's columns: out[b, d] = reduce over the bag's rows.
// Sum and Mean accumulate in Math<T> (float for 16-bit floats), as the CPU does; Max keeps the first
// maximum's row index (argmax, for the backward; -1 for an empty bag, whose output is 0).
template <class T>
__global__ void __launch_bounds__(kThreads) embedding_bag_kernel(const T* weight, int64_t dim, const int64_t* input,
                                                                 const int64_t* offsets, int64_t nbags, int64_t n,
                                                                 const T* psw, int mode, T* out, int64_t* argmax) {
  for (int64_t b = blockIdx.x; b < nbags; b += gridDim.x) {
    const int64_t lo = offsets[b];
    const int64_t hi = b + 1 < nbags ? offsets[b + 1] : n;
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
      if (mode == 2) {  // max
        Math<T> best = Math<T>(0);
        int64_t at = -1;
        for (int64_t i = lo; i < hi; ++i) {
          const Math<T> v = static_cast<Math<T>>(weight[input[i] * dim + d]);
          if (i == lo || v > best) {  // the CPU's rule: the first row, then any strictly greater
            best = v;
            at = input[i];
          }
        }
        out[b * dim + d] = T(best);
        argmax[b * dim + d] = at;
      } else {
        Math<T> acc = Math<T>(0);
        for (int64_t i = lo; i < hi; ++i) {
          const Math<T> scale = psw != nullptr ? static_cast<Math<T>>(psw[i]) : Math<T>(1);
          acc += scale * static_cast<Math<T>>(weight[input[i] * dim + d]);
        }
        if (mode == 1 && hi > lo) acc /= static_cast<Math<T>>(hi - lo);
        out[b * dim + d] = T(acc);
      }
    }
  }
}

// The weight's dense gradient: every looked-up row receives its bag's output gradient (scaled by the
// per-sample weight, divided by the bag's size for Mean); Max sends each column's gradient to its argmax.
template <class T>
__global__ void __launch_bounds__(kThreads) embedding_bag_backward_kernel(const T* grad_out, int64_t dim,
                                                                          const int64_t* input, const int64_t* offsets,
                                                                          int64_t nbags, int64_t n, const T* psw,
                                                                          int mode, const int64_t* argmax, T* grad_w) {
  for (int64_t b = blockIdx.x; b < nbags; b += gridDim.x) {
    const int64_t lo = offsets[b];
    const int64_t hi = b + 1 < nbags ? offsets[b + 1] : n;
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
      const T g = grad_out[b * dim + d];
      if (mode == 2) {
        const int64_t at = argmax[b * dim + d];
        if (at >= 0) atomic_add(grad_w + at * dim + d, g);
        continue;
      }
      const Math<T> div = mode == 1 && hi > lo ? static_cast<Math<T>>(hi - lo) : Math<T>(1);
      for (int64_t i = lo; i < hi; ++i) {
        const Math<T> scale = (psw != nullptr ? static_cast<Math<T>>(psw[i]) : Math<T>(1)) / div;
        atomic_add(grad_w + input[i] * dim + d, T(scale * static_cast<Math<T>>(g)));
      }
    }
  }
}

// gather and scatter_add: `target` (written) and `other` (read) of one dtype, walked over the index's
// sizes; `dispatch` calls its argument with the TypeTag of the element type to run Fn<T, index type> with.
template <template <class, class> class Fn, class Dispatch>
const char* launch_indexed(const KernelTensor& target, const KernelTensor& index, const KernelTensor& other,
                           int64_t step, Dispatch dispatch) {
  if (!valid_dtype(target.dtype) || target.dtype != other.dtype) return kBadDType;
  if (index.dtype != kInt64 && index.dtype != kInt32) return "index must be int64 or int32";
  Indexer<3> ix;
  int64_t n = 0;
  if (const char* err = make_indexer<3>({&target, &index, &other}, ix, n)) return err;
  if (n == 0) return nullptr;
  DeviceGuard guard(target.data);
  const char* err = dispatch([&](auto tag) {
    using T = typename decltype(tag)::type;
    if (index.dtype == kInt64) {
      return launch_elementwise(ix, n, Fn<T, int64_t>{static_cast<T*>(target.data),
                                                      static_cast<const int64_t*>(index.data),
                                                      static_cast<const T*>(other.data), step});
    }
    return launch_elementwise(ix, n, Fn<T, int32_t>{static_cast<T*>(target.data),
                                                    static_cast<const int32_t*>(index.data),
                                                    static_cast<const T*>(other.data), step});
  });
  return finish(err);
}

template <class T>
inline constexpr bool kEmbeddingType = std::is_same_v<T, float> || std::is_same_v<T, double> || kIsHalfLike<T>;

// The embedding_bag launchers: a block per bag (grid-stride beyond kMaxBlocks), a warp multiple of
// threads over the columns; `launch(TypeTag<T>, grid, threads)` starts the kernel for the weight's dtype.
template <class Launch>
const char* launch_bags(const EmbeddingBagArgs& a, void* written, Launch launch) {
  if (a.nbags == 0 || a.dim == 0) return nullptr;
  DeviceGuard guard(written);
  const auto threads = static_cast<unsigned>(std::min<int64_t>(kThreads, ((a.dim + 31) / 32) * 32));
  const char* err = dispatch_dtype(a.dtype, [&](auto tag) -> const char* {
    using T = typename decltype(tag)::type;
    if constexpr (!kEmbeddingType<T>) {
      return "embedding_bag needs a floating weight";
    } else {
      launch(tag, dim3(grid_for(a.nbags, 1)), threads);
      return launch_error();
    }
  });
  return finish(err);
}

}  // namespace
}  // namespace kern

const char* gather(const KernelTensor& out, const KernelTensor& index, const KernelTensor& a, int64_t step) {
  using namespace kern;
  // Gathering only moves elements: one kernel per element width.
  return launch_indexed<GatherFn>(out, index, a, step, [&](auto f) { return dispatch_bits(out.dtype, f); });
}

const char* scatter_add(const KernelTensor& self, const KernelTensor& index, const KernelTensor& src, int64_t step) {
  using namespace kern;
  return launch_indexed<ScatterAddFn>(self, index, src, step, [&](auto f) { return dispatch_dtype(self.dtype, f); });
}

const char* embedding_bag(const EmbeddingBagArgs& a, void* out, int64_t* argmax) {
  using namespace kern;
  return launch_bags(a, out, [&](auto tag, dim3 grid, unsigned threads) {
    using T = typename decltype(tag)::type;
    embedding_bag_kernel<T><<<grid, threads, 0, 0>>>(static_cast<const T*>(a.weight), a.dim, a.input, a.offsets,
                                                     a.nbags, a.n, static_cast<const T*>(a.per_sample_weights), a.mode,
                                                     static_cast<T*>(out), argmax);
  });
}

const char* embedding_bag_backward(const EmbeddingBagArgs& a, const void* grad_out, const int64_t* argmax,
                                   void* grad_weight) {
  using namespace kern;
  return launch_bags(a, grad_weight, [&](auto tag, dim3 grid, unsigned threads) {
    using T = typename decltype(tag)::type;
    embedding_bag_backward_kernel<T><<<grid, threads, 0, 0>>>(
        static_cast<const T*>(grad_out), a.dim, a.input, a.offsets, a.nbags, a.n,
        static_cast<const T*>(a.per_sample_weights), a.mode, argmax, static_cast<T*>(grad_weight));
  });
}

}  // namespace braid::cuda::launch
