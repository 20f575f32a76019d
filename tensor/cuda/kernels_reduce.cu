// Launchers for row reductions (sum, prod, max, min, p-norms, all, any) and arg-reductions over the last
// dimension of a contiguous [rows, n] input. See launch.h.
//
// A row is reduced by one warp (short rows, 8 rows per block) or one block (long rows). When there are too
// few rows to fill the GPU (a full reduction is one row), each row is first cut into chunks reduced into a
// scratch buffer of accumulators, which a second pass reduces per row: one block alone would read a large
// tensor at a fraction of the memory bandwidth.
#include <limits>

#include "tensor/cuda/kernels_common.cuh"

namespace braid::cuda::launch {
namespace kern {
namespace {

inline constexpr unsigned kFullMask = 0xffffffffu;
inline constexpr int kWarp = 32;
inline constexpr int kWarpsPerBlock = kThreads / kWarp;
// Rows up to this long get a warp each; longer rows a block.
inline constexpr int64_t kWarpRowMax = 1024;
// Splitting rows aims for about this many warps/blocks in flight, with chunks of at least kMinChunk
// elements so that the second pass stays small.
inline constexpr int64_t kTargetUnits = 1024;
inline constexpr int64_t kMinChunk = 4096;

template <class A>
__device__ __forceinline__ A shfl_xor(A v, int mask) {
  if constexpr (std::is_same_v<A, int64_t>) {
    return static_cast<int64_t>(__shfl_xor_sync(kFullMask, static_cast<long long>(v), mask));
  } else {
    return __shfl_xor_sync(kFullMask, v, mask);
  }
}

// Accumulators, as the CPU's: sums (and norms) of float32 in double so that long sums keep float32
// accuracy, of 16-bit floats in float; products and extrema in the math type; integers and bool in int64.
template <class T>
using AccOf = std::conditional_t<kIsFloating<T>, Math<T>, int64_t>;
template <class T>
using SumAccOf = std::conditional_t<kIsHalfLike<T>, float, std::conditional_t<kIsFloating<T>, double, int64_t>>;

template <class A>
__device__ __forceinline__ A to_acc(auto v) {
  return static_cast<A>(static_cast<Math<decltype(v)>>(v));
}

// NaN-propagating max/min (x != x is false for integers).
template <class A>
__device__ __forceinline__ A max_nan(A x, A y) {
  return (x != x || x > y) ? x : y;
}
template <class A>
__device__ __forceinline__ A min_nan(A x, A y) {
  return (x != x || x < y) ? x : y;
}

template <class A>
constexpr A lowest() {
  if constexpr (std::is_floating_point_v<A>) return -std::numeric_limits<A>::infinity();
  else return std::numeric_limits<A>::lowest();
}
template <class A>
constexpr A highest() {
  if constexpr (std::is_floating_point_v<A>) return std::numeric_limits<A>::infinity();
  else return std::numeric_limits<A>::max();
}

// A reducer: identity(), transform(element, column) into an accumulator, an associative combine(), the
// warp shuffle of an accumulator and finish() into the value stored. Integer sums and products wrap.
template <class A>
struct ScalarAcc {
  using Acc = A;
  __device__ __forceinline__ A shfl(A v, int mask) const { return shfl_xor(v, mask); }
  __device__ __forceinline__ A finish(A v) const { return v; }
};

template <class A>
struct SumR : ScalarAcc<A> {
  __device__ A identity() const { return A(0); }
  template <class In>
  __device__ A transform(In v, int64_t) const { return to_acc<A>(v); }
  __device__ A combine(A x, A y) const {
    if constexpr (std::is_integral_v<A>) return static_cast<A>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
    else return x + y;
  }
};

template <class A>
struct ProdR : ScalarAcc<A> {
  __device__ A identity() const { return A(1); }
  template <class In>
  __device__ A transform(In v, int64_t) const { return to_acc<A>(v); }
  __device__ A combine(A x, A y) const {
    if constexpr (std::is_integral_v<A>) return static_cast<A>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
    else return x * y;
  }
};

template <class A, bool kMax>
struct ExtremumR : ScalarAcc<A> {
  __device__ A identity() const { return kMax ? lowest<A>() : highest<A>(); }
  template <class In>
  __device__ A transform(In v, int64_t) const { return to_acc<A>(v); }
  __device__ A combine(A x, A y) const { return kMax ? max_nan(x, y) : min_nan(x, y); }
};

template <bool kAll>
struct LogicalR : ScalarAcc<int> {
  __device__ int identity() const { return kAll ? 1 : 0; }
  template <class In>
  __device__ int transform(In v, int64_t) const { return convert<bool>(v) ? 1 : 0; }
  __device__ int combine(int x, int y) const { return kAll ? (x & y) : (x | y); }
};

// p-norms: the special exponents avoid pow() and match their definitions exactly
// (inf: max |x|, -inf: min |x|, 0: count of non-zeros).
enum class NormMode { Inf, NegInf, Zero, One, Two, General };

template <class A>
struct NormR {
  using Acc = A;
  NormMode mode;
  A p;
  __device__ A shfl(A v, int mask) const { return shfl_xor(v, mask); }
  __device__ A identity() const { return mode == NormMode::NegInf ? highest<A>() : A(0); }
  template <class In>
  __device__ A transform(In v, int64_t) const {
    const A x = to_acc<A>(v);
    const A a = x < A(0) ? -x : x;  // keeps NaN
    switch (mode) {
      case NormMode::Zero: return x != A(0) ? A(1) : A(0);
      case NormMode::Two: return x * x;
      case NormMode::General: return m_pow(a, p);
      default: return a;
    }
  }
  __device__ A combine(A x, A y) const {
    if (mode == NormMode::Inf) return max_nan(x, y);
    if (mode == NormMode::NegInf) return min_nan(x, y);
    return x + y;
  }
  __device__ A finish(A v) const {
    if (mode == NormMode::Two) return m_sqrt(v);
    if (mode == NormMode::General) return m_pow(v, A(1) / p);
    return v;
  }
};

// Arg-reductions carry (value, column). Ties and NaNs go to the lowest column; a NaN beats any number
// (NaN is the max, and, as in PyTorch, also what argmin returns, matching min's propagated NaN value).
template <class A>
struct ArgAcc {  // no member initialisers: it lives in __shared__ memory
  A value;
  int64_t index;
};

template <class A>
struct ArgR {
  using Acc = ArgAcc<A>;
  bool is_max;
  __device__ Acc identity() const { return {is_max ? lowest<A>() : highest<A>(), std::numeric_limits<int64_t>::max()}; }
  template <class In>
  __device__ Acc transform(In v, int64_t column) const { return {to_acc<A>(v), column}; }
  __device__ Acc combine(Acc x, Acc y) const {
    const bool x_nan = x.value != x.value, y_nan = y.value != y.value;
    bool take_x;
    if (x_nan || y_nan) take_x = x_nan && (!y_nan || x.index < y.index);
    else if (x.value == y.value) take_x = x.index < y.index;
    else take_x = is_max ? x.value > y.value : x.value < y.value;
    return take_x ? x : y;
  }
  __device__ Acc shfl(Acc v, int mask) const { return {shfl_xor(v.value, mask), shfl_xor(v.index, mask)}; }
  __device__ int64_t finish(Acc v) const { return v.index; }
};

// One launch: rows of `n` elements, each cut into `splits` chunks of `chunk` elements ("units"). Unit
// results go to `partial` (accumulators) when it is set, else finished into `out` converted to out_dtype.
template <class In, class R>
struct ReduceArgs {
  const In* in;
  int64_t rows;
  int64_t n;
  int64_t chunk;
  int64_t splits;
  bool warp_per_unit;
  typename R::Acc* partial;
  void* out;
  int out_dtype;
  R r;
};

template <class R>
__device__ __forceinline__ typename R::Acc warp_reduce(const R& r, typename R::Acc acc) {
#pragma unroll
  for (int mask = kWarp / 2; mask > 0; mask >>= 1) acc = r.combine(acc, r.shfl(acc, mask));
  return acc;
}

// kTransform: the input holds elements (first pass) rather than accumulators (second pass).
template <class In, class R, bool kTransform>
__global__ void __launch_bounds__(kThreads) reduce_kernel(ReduceArgs<In, R> args) {
  using Acc = typename R::Acc;
  __shared__ Acc warp_results[kWarpsPerBlock];
  const R& r = args.r;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const bool per_warp = args.warp_per_unit;  // uniform over the grid
  const int64_t units = args.rows * args.splits;
  const int64_t units_per_block = per_warp ? kWarpsPerBlock : 1;
  const int width = per_warp ? kWarp : kThreads;
  const int tid = per_warp ? lane : static_cast<int>(threadIdx.x);
  for (int64_t first = blockIdx.x * units_per_block; first < units; first += gridDim.x * units_per_block) {
    const int64_t unit = first + (per_warp ? warp : 0);
    Acc acc = r.identity();
    if (unit < units) {
      const int64_t row = unit / args.splits;
      const int64_t begin = (unit % args.splits) * args.chunk;
      const int64_t end = min(args.n, begin + args.chunk);
      const In* p = args.in + row * args.n;
      for (int64_t j = begin + tid; j < end; j += width) {
        if constexpr (kTransform) acc = r.combine(acc, r.transform(p[j], j));
        else acc = r.combine(acc, p[j]);
      }
    }
    acc = warp_reduce(r, acc);
    if (!per_warp) {  // `unit` is the same for the whole block here, so the barriers are uniform
      if (lane == 0) warp_results[warp] = acc;
      __syncthreads();
      if (warp == 0) acc = warp_reduce(r, lane < kWarpsPerBlock ? warp_results[lane] : r.identity());
      __syncthreads();  // warp_results is rewritten by the next unit
    }
    if (tid == 0 && unit < units) {
      if (args.partial != nullptr) args.partial[unit] = acc;
      else store_as(args.out, args.out_dtype, unit, r.finish(acc));
    }
  }
}

template <class In, class R, bool kTransform>
const char* launch_reduce(const ReduceArgs<In, R>& args) {
  const int64_t units = args.rows * args.splits;
  const unsigned grid = grid_for(units, args.warp_per_unit ? kWarpsPerBlock : 1);
  reduce_kernel<In, R, kTransform><<<grid, kThreads, 0, 0>>>(args);
  return launch_error();
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <class T, class R>
const char* run_reduce(const R& r, const KernelTensor& out, const KernelTensor& in, int64_t rows, int64_t n) {
  using Acc = typename R::Acc;
  int64_t splits = 1;
  if (rows < kTargetUnits && n >= 2 * kMinChunk) {
    splits = std::min(ceil_div(n, kMinChunk), std::max<int64_t>(1, kTargetUnits / rows));
  }
  int64_t chunk = std::max<int64_t>(ceil_div(n, splits), 1);
  splits = std::max<int64_t>(ceil_div(n, chunk), 1);  // no empty chunks
  Acc* partial = nullptr;
  if (splits > 1) {
    const size_t bytes = static_cast<size_t>(rows * splits) * sizeof(Acc);
    if (cudaMallocAsync(reinterpret_cast<void**>(&partial), bytes, 0) != cudaSuccess) {
      (void)cudaGetLastError();  // no stream-ordered pool: fall back to one pass, slower but correct
      partial = nullptr;
      splits = 1;
      chunk = std::max<int64_t>(n, 1);
    }
  }
  const auto* data = static_cast<const T*>(in.data);
  const char* err = launch_reduce<T, R, true>(
      ReduceArgs<T, R>{data, rows, n, chunk, splits, chunk <= kWarpRowMax, partial, out.data, out.dtype, r});
  if (partial != nullptr) {
    if (err == nullptr) {
      err = launch_reduce<Acc, R, false>(ReduceArgs<Acc, R>{partial, rows, splits, splits, 1, splits <= kWarpRowMax,
                                                            nullptr, out.data, out.dtype, r});
    }
    (void)cudaFreeAsync(partial, 0);
  }
  return err;
}

NormMode norm_mode(double p) {
  if (std::isinf(p)) return p > 0 ? NormMode::Inf : NormMode::NegInf;
  if (p == 0) return NormMode::Zero;
  if (p == 1) return NormMode::One;
  if (p == 2) return NormMode::Two;
  return NormMode::General;
}

const char* check_rows(const KernelTensor& out, const KernelTensor& in, int64_t rows, int64_t n) {
  if (!valid_dtype(in.dtype) || !valid_dtype(out.dtype)) return kBadDType;
  if (rows < 0 || n < 0) return "negative reduction extent";
  return nullptr;
}

}  // namespace
}  // namespace kern

const char* reduce_rows(ReduceKind kind, const KernelTensor& out, const KernelTensor& in, int64_t rows, int64_t n,
                        double p) {
  using namespace kern;
  if (const char* err = check_rows(out, in, rows, n)) return err;
  if (rows == 0) return nullptr;
  DeviceGuard guard(out.data);
  const char* err = dispatch_dtype(in.dtype, [&](auto tag) -> const char* {
    using T = typename decltype(tag)::type;
    using A = AccOf<T>;
    switch (kind) {
      case ReduceKind::Sum: return run_reduce<T>(SumR<SumAccOf<T>>{}, out, in, rows, n);
      case ReduceKind::Prod: return run_reduce<T>(ProdR<A>{}, out, in, rows, n);
      case ReduceKind::Max: return run_reduce<T>(ExtremumR<A, true>{}, out, in, rows, n);
      case ReduceKind::Min: return run_reduce<T>(ExtremumR<A, false>{}, out, in, rows, n);
      case ReduceKind::All: return run_reduce<T>(LogicalR<true>{}, out, in, rows, n);
      case ReduceKind::Any: return run_reduce<T>(LogicalR<false>{}, out, in, rows, n);
      case ReduceKind::NormP:
        if constexpr (kIsFloating<T>) {
          using S = SumAccOf<T>;
          return run_reduce<T>(NormR<S>{norm_mode(p), static_cast<S>(p)}, out, in, rows, n);
        } else {
          return "norm needs a floating dtype (the front end converts integers first)";
        }
    }
    return "unknown reduction";
  });
  return finish(err);
}

const char* arg_reduce_rows(bool is_max, const KernelTensor& out, const KernelTensor& in, int64_t rows,
                            int64_t n) {
  using namespace kern;
  if (const char* err = check_rows(out, in, rows, n)) return err;
  if (out.dtype != kInt64) return "argmax/argmin output must be int64";
  if (rows == 0) return nullptr;
  DeviceGuard guard(out.data);
  const char* err = dispatch_dtype(in.dtype, [&](auto tag) -> const char* {
    using T = typename decltype(tag)::type;
    return run_reduce<T>(ArgR<AccOf<T>>{is_max}, out, in, rows, n);
  });
  return finish(err);
}

}  // namespace braid::cuda::launch
