// Launchers for elementwise arithmetic, comparisons, logic and unary math. See launch.h.
//
// One kernel per (dtype, op) pair that is defined; undefined pairs (bitwise ops on floats, transcendental
// functions on integers, ...) are rejected on the host without instantiating anything, which keeps nvcc's
// compile time down.
#include "tensor/cuda/kernels_common.cuh"

namespace braid::cuda::launch {
namespace kern {
namespace {

inline constexpr const char* kNeedsFloat = "op needs a floating dtype (the front end converts integers first)";
inline constexpr const char* kWrongOut = "output dtype is not the op's result dtype";
inline constexpr const char* kMixed =
    "operands must share one dtype (b may be float32 only for arithmetic on float16/bfloat16 a)";

// Integer arithmetic wraps like PyTorch's two's-complement results. Signed overflow is undefined in C++,
// so it runs on an unsigned type at least as wide as the element and is truncated back.
template <class T>
using Wrap = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;
// The type binary arithmetic runs in: Math<T> for floats, Wrap<T> for integers and bool.
template <class T>
using Arith = std::conditional_t<kIsFloating<T>, Math<T>, Wrap<T>>;

template <class T>
__device__ __forceinline__ Arith<T> to_arith(T v) {
  return static_cast<Arith<T>>(static_cast<Math<T>>(v));
}

template <class T>
__device__ __forceinline__ T from_arith(Arith<T> v) {
  if constexpr (std::is_same_v<T, bool>) return v != 0;
  else if constexpr (kIsHalfLike<T>) return T(v);
  else return static_cast<T>(v);  // for integers: modulo 2^bits (C++20)
}

template <class T>
Arith<T> arith_scalar(KernelScalar s) {
  if constexpr (kIsFloating<T>) return static_cast<Arith<T>>(s.d);
  else if constexpr (std::is_same_v<T, bool>) return s.d != 0.0;  // as Scalar::to<bool>(): 0.5 is true
  else return static_cast<Arith<T>>(s.i);
}

// --- binary ops: operator()(T a, T b) returns the output element

// alpha * b rounded on its own, as the CPU computes it: nvcc would otherwise fuse a + alpha * b into one
// FMA and round differently.
__device__ __forceinline__ float mul_rn(float x, float y) { return __fmul_rn(x, y); }
__device__ __forceinline__ double mul_rn(double x, double y) { return __dmul_rn(x, y); }
template <class U>
__device__ __forceinline__ U mul_rn(U x, U y) {
  return x * y;
}

// Arithmetic ops take b as TB: T, or float for a scalar operand of a 16-bit float op, which stays
// unrounded in the math type (as on the CPU); Arith<float> is Arith<Half>, so the formulas are the same.
template <class T>
struct AddOp {
  Arith<T> alpha;
  template <class TB>
  __device__ T operator()(T a, TB b) const {
    if constexpr (std::is_same_v<T, bool>) return a || (alpha != 0 && b);  // a sum of bools saturates
    else return from_arith<T>(to_arith(a) + mul_rn(alpha, to_arith(b)));
  }
};
template <class T>
struct SubOp {
  Arith<T> alpha;
  template <class TB>
  __device__ T operator()(T a, TB b) const { return from_arith<T>(to_arith(a) - mul_rn(alpha, to_arith(b))); }
};
template <class T>
struct MulOp {
  template <class TB>
  __device__ T operator()(T a, TB b) const { return from_arith<T>(to_arith(a) * to_arith(b)); }
};
template <class T>
struct DivOp {
  template <class TB>
  __device__ T operator()(T a, TB b) const { return from_arith<T>(to_arith(a) / to_arith(b)); }
};
template <class T>
struct PowOp {
  template <class TB>
  __device__ T operator()(T a, TB b) const {
    if constexpr (kIsFloating<T>) {
      return from_arith<T>(m_pow(to_arith(a), to_arith(b)));
    } else {
      if constexpr (std::is_signed_v<T>) {
        // Negative integer exponents: only 1 and -1 have non-zero results (as PyTorch).
        if (b < 0) {
          if (a == 1) return T(1);
          if (a == -1) return (b & 1) != 0 ? T(-1) : T(1);
          return T(0);
        }
      }
      Wrap<T> base = to_arith(a);
      Wrap<T> result = 1;
      for (uint64_t e = static_cast<uint64_t>(b); e != 0; e >>= 1) {
        if ((e & 1) != 0) result *= base;
        base *= base;
      }
      return from_arith<T>(result);
    }
  }
};
// Maximum/Minimum return NaN when either input is NaN (x != x is false for integers and bool) and `a` on
// ties, as the CPU's (so max(-0.0, 0.0) is -0.0 on both).
template <class T>
struct MaximumOp {
  __device__ T operator()(T a, T b) const {
    const Math<T> x = a, y = b;
    return (y != y || x < y) ? b : a;
  }
};
template <class T>
struct MinimumOp {
  __device__ T operator()(T a, T b) const {
    const Math<T> x = a, y = b;
    return (y != y || y < x) ? b : a;
  }
};

// Comparisons and logic produce bool.
enum class Cmp { Eq, Ne, Lt, Le, Gt, Ge };
template <class T, Cmp C>
struct CompareOp {
  __device__ bool operator()(T a, T b) const {
    const Math<T> x = a, y = b;
    if constexpr (C == Cmp::Eq) return x == y;
    else if constexpr (C == Cmp::Ne) return x != y;
    else if constexpr (C == Cmp::Lt) return x < y;
    else if constexpr (C == Cmp::Le) return x <= y;
    else if constexpr (C == Cmp::Gt) return x > y;
    else return x >= y;
  }
};
template <class T, bool kAnd>
struct LogicalOp {
  __device__ bool operator()(T a, T b) const {
    return kAnd ? (convert<bool>(a) && convert<bool>(b)) : (convert<bool>(a) || convert<bool>(b));
  }
};
enum class Bitwise { And, Or, Xor };
template <class T, Bitwise B>
struct BitwiseOp {
  __device__ T operator()(T a, T b) const {
    if constexpr (B == Bitwise::And) return static_cast<T>(a & b);
    else if constexpr (B == Bitwise::Or) return static_cast<T>(a | b);
    else return static_cast<T>(a ^ b);
  }
};

template <class Out, class T, class TB, class Op>
struct BinaryFn {
  Out* out;
  const T* a;
  const TB* b;
  Op op;
  __device__ __forceinline__ void operator()(const int64_t (&off)[3]) const { out[off[0]] = op(a[off[1]], b[off[2]]); }
};

template <class T>
struct BinaryLaunch {
  const KernelTensor& out;
  const KernelTensor& a;
  const KernelTensor& b;
  const Indexer<3>& ix;
  int64_t n;

  template <class Out, class Op, class TB = T>
  const char* run(Op op) const {
    if (out.dtype != code_of<Out>()) return kWrongOut;
    const BinaryFn<Out, T, TB, Op> fn{static_cast<Out*>(out.data), static_cast<const T*>(a.data),
                                      static_cast<const TB*>(b.data), op};
    return launch_elementwise(ix, n, fn);
  }

  // a 16-bit float with a float32 b: the arithmetic ops only.
  const char* mixed(BinaryOp op, KernelScalar alpha) const {
    if constexpr (kIsHalfLike<T>) {
      if (b.dtype != kFloat32) return kMixed;
      switch (op) {
        case BinaryOp::Add: return run<T, AddOp<T>, float>(AddOp<T>{arith_scalar<T>(alpha)});
        case BinaryOp::Sub: return run<T, SubOp<T>, float>(SubOp<T>{arith_scalar<T>(alpha)});
        case BinaryOp::Mul: return run<T, MulOp<T>, float>(MulOp<T>{});
        case BinaryOp::Div: return run<T, DivOp<T>, float>(DivOp<T>{});
        case BinaryOp::Pow: return run<T, PowOp<T>, float>(PowOp<T>{});
        default: break;
      }
    }
    return kMixed;
  }

  const char* operator()(BinaryOp op, KernelScalar alpha) const {
    if (b.dtype != a.dtype) return mixed(op, alpha);
    switch (op) {
      case BinaryOp::Add: return run<T>(AddOp<T>{arith_scalar<T>(alpha)});
      case BinaryOp::Sub: return run<T>(SubOp<T>{arith_scalar<T>(alpha)});
      case BinaryOp::Mul: return run<T>(MulOp<T>{});
      case BinaryOp::Div:
        if constexpr (kIsFloating<T>) return run<T>(DivOp<T>{});
        else return kNeedsFloat;
      case BinaryOp::Pow: return run<T>(PowOp<T>{});
      case BinaryOp::Maximum: return run<T>(MaximumOp<T>{});
      case BinaryOp::Minimum: return run<T>(MinimumOp<T>{});
      case BinaryOp::Eq: return run<bool>(CompareOp<T, Cmp::Eq>{});
      case BinaryOp::Ne: return run<bool>(CompareOp<T, Cmp::Ne>{});
      case BinaryOp::Lt: return run<bool>(CompareOp<T, Cmp::Lt>{});
      case BinaryOp::Le: return run<bool>(CompareOp<T, Cmp::Le>{});
      case BinaryOp::Gt: return run<bool>(CompareOp<T, Cmp::Gt>{});
      case BinaryOp::Ge: return run<bool>(CompareOp<T, Cmp::Ge>{});
      case BinaryOp::LogicalAnd: return run<bool>(LogicalOp<T, true>{});
      case BinaryOp::LogicalOr: return run<bool>(LogicalOp<T, false>{});
      case BinaryOp::BitwiseAnd:
      case BinaryOp::BitwiseOr:
      case BinaryOp::BitwiseXor:
        if constexpr (std::is_integral_v<T>) {
          if (op == BinaryOp::BitwiseAnd) return run<T>(BitwiseOp<T, Bitwise::And>{});
          if (op == BinaryOp::BitwiseOr) return run<T>(BitwiseOp<T, Bitwise::Or>{});
          return run<T>(BitwiseOp<T, Bitwise::Xor>{});
        } else {
          return "bitwise ops need an integral or bool dtype";
        }
    }
    return "unknown binary op";
  }
};

// --- unary ops: operator()(T a) returns the output element

enum class Fn { Neg, Exp, Log, Sqrt, Tanh, Sigmoid, Erf, Abs };
template <class T, Fn F>
struct FloatOp {  // floating T only
  __device__ T operator()(T v) const {
    using M = Math<T>;
    const M x = v;
    if constexpr (F == Fn::Neg) return T(-x);
    else if constexpr (F == Fn::Exp) return T(m_exp(x));
    else if constexpr (F == Fn::Log) return T(m_log(x));
    else if constexpr (F == Fn::Sqrt) return T(m_sqrt(x));
    else if constexpr (F == Fn::Tanh) return T(m_tanh(x));
    else if constexpr (F == Fn::Sigmoid) return T(M(1) / (M(1) + m_exp(-x)));
    else if constexpr (F == Fn::Erf) return T(m_erf(x));
    else return T(m_abs(x));
  }
};
template <class T>
struct IntNegOp {
  __device__ T operator()(T v) const { return from_arith<T>(Wrap<T>(0) - to_arith(v)); }
};
template <class T>
struct IntAbsOp {
  __device__ T operator()(T v) const {
    if constexpr (std::is_signed_v<T>) return v < 0 ? from_arith<T>(Wrap<T>(0) - to_arith(v)) : v;
    else return v;
  }
};
template <class T>
struct SignOp {  // 0 for zeros and NaN, as PyTorch
  __device__ T operator()(T v) const {
    if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>) {
      return static_cast<T>(v != 0);
    } else {
      const Math<T> x = v;
      return T(static_cast<Math<T>>((Math<T>(0) < x) - (x < Math<T>(0))));
    }
  }
};
template <class T>
struct ReluOp {  // keeps NaN and -0.0, as PyTorch's clamp_min(0) and the CPU kernel
  __device__ T operator()(T v) const {
    if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>) {
      return v;
    } else {
      const Math<T> x = v;
      return x < Math<T>(0) ? T(0) : v;
    }
  }
};
template <class Out, class T>
struct LogicalNotOp {
  __device__ Out operator()(T v) const { return convert<Out>(!convert<bool>(v)); }
};

template <class Out, class T, class Op>
struct UnaryFn {
  Out* out;
  const T* a;
  Op op;
  __device__ __forceinline__ void operator()(const int64_t (&off)[2]) const { out[off[0]] = op(a[off[1]]); }
};

template <class T>
struct UnaryLaunch {
  const KernelTensor& out;
  const KernelTensor& a;
  const Indexer<2>& ix;
  int64_t n;

  template <class Out, class Op>
  const char* run(Op op) const {
    if (out.dtype != code_of<Out>()) return kWrongOut;
    const UnaryFn<Out, T, Op> fn{static_cast<Out*>(out.data), static_cast<const T*>(a.data), op};
    return launch_elementwise(ix, n, fn);
  }

  const char* operator()(UnaryOp op) const {
    if (op == UnaryOp::LogicalNot) {
      // Bool output (PyTorch's logical_not); an output of the input's dtype gets 0/1 instead.
      if (out.dtype == kBool || std::is_same_v<T, bool>) return run<bool>(LogicalNotOp<bool, T>{});
      return run<T>(LogicalNotOp<T, T>{});
    }
    if constexpr (kIsFloating<T>) {
      switch (op) {
        case UnaryOp::Neg: return run<T>(FloatOp<T, Fn::Neg>{});
        case UnaryOp::Exp: return run<T>(FloatOp<T, Fn::Exp>{});
        case UnaryOp::Log: return run<T>(FloatOp<T, Fn::Log>{});
        case UnaryOp::Sqrt: return run<T>(FloatOp<T, Fn::Sqrt>{});
        case UnaryOp::Tanh: return run<T>(FloatOp<T, Fn::Tanh>{});
        case UnaryOp::Sigmoid: return run<T>(FloatOp<T, Fn::Sigmoid>{});
        case UnaryOp::Erf: return run<T>(FloatOp<T, Fn::Erf>{});
        case UnaryOp::Abs: return run<T>(FloatOp<T, Fn::Abs>{});
        case UnaryOp::Sign: return run<T>(SignOp<T>{});
        case UnaryOp::Relu: return run<T>(ReluOp<T>{});
        default: return "unknown unary op";
      }
    } else {
      switch (op) {
        case UnaryOp::Neg:
          if constexpr (std::is_same_v<T, bool>) return "neg is not defined for bool (use logical_not)";
          else return run<T>(IntNegOp<T>{});
        case UnaryOp::Abs: return run<T>(IntAbsOp<T>{});
        case UnaryOp::Sign: return run<T>(SignOp<T>{});
        case UnaryOp::Relu: return run<T>(ReluOp<T>{});
        case UnaryOp::Exp:
        case UnaryOp::Log:
        case UnaryOp::Sqrt:
        case UnaryOp::Tanh:
        case UnaryOp::Sigmoid:
        case UnaryOp::Erf: return kNeedsFloat;
        default: return "unknown unary op";
      }
    }
  }
};

}  // namespace
}  // namespace kern

const char* binary(BinaryOp op, const KernelTensor& out, const KernelTensor& a, const KernelTensor& b,
                   KernelScalar alpha) {
  using namespace kern;
  if (!valid_dtype(out.dtype) || !valid_dtype(b.dtype)) return kBadDType;
  Indexer<3> ix;
  int64_t n = 0;
  if (const char* err = make_indexer<3>({&out, &a, &b}, ix, n)) return err;
  if (n == 0) return nullptr;
  DeviceGuard guard(out.data);
  const char* err = dispatch_dtype(a.dtype, [&](auto tag) -> const char* {
    using T = typename decltype(tag)::type;
    return BinaryLaunch<T>{out, a, b, ix, n}(op, alpha);
  });
  return finish(err);
}

const char* unary(UnaryOp op, const KernelTensor& out, const KernelTensor& a) {
  using namespace kern;
  if (!valid_dtype(out.dtype)) return kBadDType;
  Indexer<2> ix;
  int64_t n = 0;
  if (const char* err = make_indexer<2>({&out, &a}, ix, n)) return err;
  if (n == 0) return nullptr;
  DeviceGuard guard(out.data);
  const char* err = dispatch_dtype(a.dtype, [&](auto tag) -> const char* {
    using T = typename decltype(tag)::type;
    return UnaryLaunch<T>{out, a, ix, n}(op);
  });
  return finish(err);
}

}  // namespace braid::cuda::launch
