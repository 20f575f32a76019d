// CPU elementwise kernels: one typed loop per (op, dtype), chosen once per call, never per element.
//
// GCC only vectorises loops with unknown trip counts at -O3 (its -O2 cost model refuses epilogues), and the
// contiguous float paths here are the ones benchmarks compare against memcpy, so this file asks for the
// dynamic cost model. The pragma comes before every include so that all code in the file, header code
// included, carries the same options and stays inlinable.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

#include "tensor/ops/elementwise_kernels_cpu.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "tensor/dispatch.h"
#include "tensor/loop.h"

// The typed loops may write through the pointer they read (out == a in place), never ahead of it: the
// front ends copy inputs that overlap the output in another layout. So iterations are independent.
#if defined(__clang__)
#define BRAID_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define BRAID_IVDEP _Pragma("GCC ivdep")
#else
#define BRAID_IVDEP
#endif

namespace braid::detail {
namespace {

template <class T>
inline constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Integer arithmetic wraps like PyTorch's; signed overflow is undefined in C++, so go through unsigned.
template <class T>
T wrap_add(T a, T b) {
  if constexpr (kIsInt<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <class T>
T wrap_sub(T a, T b) {
  if constexpr (kIsInt<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return a - b;
  }
}

template <class T>
T wrap_mul(T a, T b) {
  if constexpr (kIsInt<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

// PyTorch's powi: negative exponents give 0 except for bases 1 and -1 (the front end rejects negative
// scalar exponents, but tensor exponents may hold them).
template <class T>
T int_pow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return exp % 2 == 0 ? T(1) : T(-1);
      return 0;
    }
  }
  using U = std::make_unsigned_t<T>;
  U result = 1;
  U b = static_cast<U>(base);
  auto e = static_cast<U>(exp);
  while (e != 0) {
    if (e & 1u) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
    e = static_cast<U>(e >> 1);
  }
  return static_cast<T>(result);
}

template <class M>
bool is_nan(M v) {
  if constexpr (std::is_floating_point_v<M>) return std::isnan(v);
  else return false;
}

// std::max/std::min with NaN from either side winning, as torch.maximum/minimum.
template <class M>
M nan_max(M a, M b) {
  if (is_nan(a)) return a;
  if (is_nan(b)) return b;
  return (a < b) ? b : a;
}

template <class M>
M nan_min(M a, M b) {
  if (is_nan(a)) return a;
  if (is_nan(b)) return b;
  return (b < a) ? b : a;
}

[[noreturn]] void unsupported(std::string_view op, DType dtype) {
  BRAID_THROW(InternalError, "{}: CPU kernel reached with unsupported dtype {}", op, dtype);
}

// Runs o = f(x...) over out and ins (all views broadcast to out's shape): a typed loop when every operand
// is dense in the row, a byte-stride loop otherwise.
template <class O, class... In, class F, size_t... I>
void run_rows(std::index_sequence<I...>, const F& f, const Tensor& out,
              const std::array<const Tensor*, sizeof...(In)>& ins) {
  constexpr size_t kN = sizeof...(In) + 1;
  BRAID_ASSERT(out.dtype() == dtype_of<O>(), "kernel output type mismatch: {}", out.describe());
  BRAID_ASSERT(((ins[I]->dtype() == dtype_of<In>()) && ...), "kernel input type mismatch");
  const auto rows = rows_for<kN>(out.shape(), {&out, ins[I]...});
  for_each_row(rows, [&f](const std::array<char*, kN>& p, const std::array<int64_t, kN>& s, int64_t n) {
    if (s[0] == sizeof(O) && ((s[I + 1] == static_cast<int64_t>(sizeof(In))) && ...)) {
      O* o = reinterpret_cast<O*>(p[0]);
      [&](const In*... x) {
BRAID_IVDEP
        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]...);
      }(reinterpret_cast<const In*>(p[I + 1])...);
      return;
    }
    [&](auto... x) {
      char* o = p[0];
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<O*>(o) = f(*reinterpret_cast<const In*>(x)...);
        o += s[0];
        ((x += s[I + 1]), ...);
      }
    }(p[I + 1]...);
  });
}

template <class O, class... In, class F>
void run(const F& f, const Tensor& out, const std::array<const Tensor*, sizeof...(In)>& ins) {
  run_rows<O, In...>(std::index_sequence_for<In...>{}, f, out, ins);
}

// Binary loops also get typed paths for one broadcast operand (tensor-scalar ops, bias rows), which
// the generic byte-stride loop would otherwise take.
template <class O, class A, class B, class F>
void run_binary(const F& f, const Tensor& out, const Tensor& a, const Tensor& b) {
  BRAID_ASSERT(out.dtype() == dtype_of<O>() && a.dtype() == dtype_of<A>() && b.dtype() == dtype_of<B>(),
               "binary kernel type mismatch: {} {} {}", out.describe(), a.describe(), b.describe());
  const auto rows = rows_for<3>(out.shape(), {&out, &a, &b});
  for_each_row(rows, [&f](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
    if (s[0] == sizeof(O)) {
      O* o = reinterpret_cast<O*>(p[0]);
      const A* x = reinterpret_cast<const A*>(p[1]);
      const B* y = reinterpret_cast<const B*>(p[2]);
      if (s[1] == sizeof(A) && s[2] == sizeof(B)) {
BRAID_IVDEP
        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
        return;
      }
      if (s[1] == sizeof(A) && s[2] == 0) {
        const B yv = *y;
BRAID_IVDEP
        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
        return;
      }
      if (s[1] == 0 && s[2] == sizeof(B)) {
        const A xv = *x;
BRAID_IVDEP
        for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
        return;
      }
    }
    char* o = p[0];
    const char* x = p[1];
    const char* y = p[2];
    for (int64_t i = 0; i < n; ++i, o += s[0], x += s[1], y += s[2]) {
      *reinterpret_cast<O*>(o) = f(*reinterpret_cast<const A*>(x), *reinterpret_cast<const B*>(y));
    }
  });
}

// T: the compute (and, except for bool-valued ops, output) type; B: b's element type (T, or float for a
// scalar operand of a 16-bit float op).
template <class T, class B>
void binary_typed(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha) {
  using M = opmath_t<T>;
  constexpr bool kBool = std::is_same_v<T, bool>;
  const auto name = op_name(op);
  switch (op) {
    case BinaryOp::Add:
    case BinaryOp::Sub: {
      const bool is_add = op == BinaryOp::Add;
      if constexpr (kBool) {
        if (!is_add) unsupported(name, out.dtype());
        const bool al = alpha.to<bool>();
        return run_binary<T, T, B>([al](bool x, bool y) { return x || (al && y); }, out, a, b);
      } else {
        const M al = alpha.to<M>();
        if (al == M(1)) {
          if (is_add) return run_binary<T, T, B>([](T x, B y) { return T(wrap_add(M(x), M(y))); }, out, a, b);
          return run_binary<T, T, B>([](T x, B y) { return T(wrap_sub(M(x), M(y))); }, out, a, b);
        }
        if (is_add) {
          return run_binary<T, T, B>([al](T x, B y) { return T(wrap_add(M(x), wrap_mul(al, M(y)))); }, out, a, b);
        }
        return run_binary<T, T, B>([al](T x, B y) { return T(wrap_sub(M(x), wrap_mul(al, M(y)))); }, out, a, b);
      }
    }
    case BinaryOp::Mul:
      if constexpr (kBool) return run_binary<T, T, B>([](bool x, bool y) { return x && y; }, out, a, b);
      else return run_binary<T, T, B>([](T x, B y) { return T(wrap_mul(M(x), M(y))); }, out, a, b);
    case BinaryOp::Div:
      if constexpr (is_floating_v<T>) return run_binary<T, T, B>([](T x, B y) { return T(M(x) / M(y)); }, out, a, b);
      else unsupported(name, out.dtype());
    case BinaryOp::Pow:
      if constexpr (is_floating_v<T>) {
        return run_binary<T, T, B>([](T x, B y) { return T(std::pow(M(x), M(y))); }, out, a, b);
      } else if constexpr (kIsInt<T>) {
        return run_binary<T, T, B>([](T x, B y) { return int_pow<T>(x, static_cast<T>(y)); }, out, a, b);
      } else {
        unsupported(name, out.dtype());
      }
    case BinaryOp::Maximum:
      return run_binary<T, T, B>([](T x, B y) { return T(nan_max(M(x), M(y))); }, out, a, b);
    case BinaryOp::Minimum:
      return run_binary<T, T, B>([](T x, B y) { return T(nan_min(M(x), M(y))); }, out, a, b);
    case BinaryOp::Eq: return run_binary<bool, T, B>([](T x, B y) { return M(x) == M(y); }, out, a, b);
    case BinaryOp::Ne: return run_binary<bool, T, B>([](T x, B y) { return M(x) != M(y); }, out, a, b);
    case BinaryOp::Lt: return run_binary<bool, T, B>([](T x, B y) { return M(x) < M(y); }, out, a, b);
    case BinaryOp::Le: return run_binary<bool, T, B>([](T x, B y) { return M(x) <= M(y); }, out, a, b);
    case BinaryOp::Gt: return run_binary<bool, T, B>([](T x, B y) { return M(x) > M(y); }, out, a, b);
    case BinaryOp::Ge: return run_binary<bool, T, B>([](T x, B y) { return M(x) >= M(y); }, out, a, b);
    case BinaryOp::LogicalAnd:
      return run_binary<bool, T, B>([](T x, B y) { return M(x) != M(0) && M(y) != M(0); }, out, a, b);
    case BinaryOp::LogicalOr:
      return run_binary<bool, T, B>([](T x, B y) { return M(x) != M(0) || M(y) != M(0); }, out, a, b);
    case BinaryOp::BitwiseAnd:
    case BinaryOp::BitwiseOr:
    case BinaryOp::BitwiseXor:
      if constexpr (std::is_integral_v<T>) {
        if (op == BinaryOp::BitwiseAnd) return run_binary<T, T, B>([](T x, B y) { return T(x & y); }, out, a, b);
        if (op == BinaryOp::BitwiseOr) return run_binary<T, T, B>([](T x, B y) { return T(x | y); }, out, a, b);
        return run_binary<T, T, B>([](T x, B y) { return T(x ^ y); }, out, a, b);
      } else {
        unsupported(name, out.dtype());
      }
  }
  unsupported(name, out.dtype());
}

// std::complex<float> or std::complex<double> operands of one dtype; the front end admits only these ops.
template <class C>
void complex_binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha) {
  using V = typename C::value_type;
  const V al = static_cast<V>(alpha.to_double());
  switch (op) {
    case BinaryOp::Add:
      if (al == V(1)) return run_binary<C, C, C>([](C x, C y) { return x + y; }, out, a, b);
      return run_binary<C, C, C>([al](C x, C y) { return x + al * y; }, out, a, b);
    case BinaryOp::Sub:
      if (al == V(1)) return run_binary<C, C, C>([](C x, C y) { return x - y; }, out, a, b);
      return run_binary<C, C, C>([al](C x, C y) { return x - al * y; }, out, a, b);
    case BinaryOp::Mul: return run_binary<C, C, C>([](C x, C y) { return x * y; }, out, a, b);
    case BinaryOp::Div: return run_binary<C, C, C>([](C x, C y) { return x / y; }, out, a, b);
    case BinaryOp::Eq: return run_binary<bool, C, C>([](C x, C y) { return x == y; }, out, a, b);
    case BinaryOp::Ne: return run_binary<bool, C, C>([](C x, C y) { return x != y; }, out, a, b);
    default: unsupported(op_name(op), out.dtype());
  }
}

template <class T>
void unary_typed(UnaryOp op, const Tensor& out, const Tensor& a) {
  using M = opmath_t<T>;
  const auto name = op_name(op);
  const std::array<const Tensor*, 1> in{&a};
  auto floating = [&](auto fn) {
    if constexpr (is_floating_v<T>) return run<T, T>([fn](T x) { return T(fn(M(x))); }, out, in);
    else unsupported(name, out.dtype());
  };
  switch (op) {
    case UnaryOp::Neg:
      if constexpr (std::is_same_v<T, bool>) unsupported(name, out.dtype());
      else if constexpr (kIsInt<T>) return run<T, T>([](T x) { return wrap_sub(T(0), x); }, out, in);
      else return run<T, T>([](T x) { return T(-M(x)); }, out, in);  // -0.0, not 0 - 0.0
    case UnaryOp::Exp: return floating([](M x) { return std::exp(x); });
    case UnaryOp::Log: return floating([](M x) { return std::log(x); });
    case UnaryOp::Sqrt: return floating([](M x) { return std::sqrt(x); });
    case UnaryOp::Tanh: return floating([](M x) { return std::tanh(x); });
    case UnaryOp::Erf: return floating([](M x) { return std::erf(x); });
    case UnaryOp::Sigmoid: return floating([](M x) { return M(1) / (M(1) + std::exp(-x)); });
    case UnaryOp::Relu:
      // (x < 0) ? 0 : x keeps NaN and -0.0 as PyTorch's clamp_min-based relu does.
      if constexpr (std::is_same_v<T, bool>) unsupported(name, out.dtype());
      else return run<T, T>([](T x) { return M(x) < M(0) ? T(M(0)) : x; }, out, in);
    case UnaryOp::Abs:
      if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>) {
        return run<T, T>([](T x) { return x; }, out, in);
      } else if constexpr (kIsInt<T>) {
        return run<T, T>([](T x) { return x < 0 ? wrap_sub(T(0), x) : x; }, out, in);
      } else {
        return run<T, T>([](T x) { return T(std::abs(M(x))); }, out, in);
      }
    case UnaryOp::Sign:
      if constexpr (std::is_same_v<T, bool>) {
        return run<T, T>([](T x) { return x; }, out, in);
      } else {
        // NaN compares false both ways and gives 0, as in PyTorch.
        return run<T, T>([](T x) { return T(static_cast<M>((M(0) < M(x)) - (M(x) < M(0)))); }, out, in);
      }
    case UnaryOp::LogicalNot: return run<bool, T>([](T x) { return M(x) == M(0); }, out, in);
  }
  unsupported(name, out.dtype());
}

}  // namespace

void cpu_binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha) {
  if (is_complex(a.dtype())) {
    BRAID_ASSERT(b.dtype() == a.dtype(), "{}: b {} with a {}", op_name(op), b.describe(), a.describe());
    if (a.dtype() == DType::Complex64) return complex_binary<std::complex<float>>(op, out, a, b, alpha);
    return complex_binary<std::complex<double>>(op, out, a, b, alpha);
  }
  dispatch(a.dtype(), op_name(op).data(), [&]<class T>() {
    if (b.dtype() == a.dtype()) {
      binary_typed<T, T>(op, out, a, b, alpha);
    } else if constexpr (!std::is_same_v<T, opmath_t<T>>) {
      BRAID_ASSERT(b.dtype() == dtype_of<opmath_t<T>>(), "{}: b {} with a {}", op_name(op), b.describe(),
                   a.describe());
      binary_typed<T, opmath_t<T>>(op, out, a, b, alpha);
    } else {
      BRAID_THROW(InternalError, "{}: CPU kernel got mixed operand dtypes {} and {}", op_name(op), a.describe(),
                  b.describe());
    }
  });
}

void cpu_unary(UnaryOp op, const Tensor& out, const Tensor& a) {
  if (is_complex(a.dtype())) {
    if (op != UnaryOp::Neg) unsupported(op_name(op), a.dtype());
    dispatch_with_complex(a.dtype(), "neg", [&]<class C>() {
      if constexpr (is_complex_v<C>) run<C, C>([](C x) { return -x; }, out, {&a});
    });
    return;
  }
  dispatch(a.dtype(), op_name(op).data(), [&]<class T>() { unary_typed<T>(op, out, a); });
}

void cpu_where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch_with_complex(out.dtype(), "where", [&]<class T>() {
    run<T, bool, T, T>([](bool c, T x, T y) { return c ? x : y; }, out, {&cond, &a, &b});
  });
}

void cpu_clamp(const Tensor& out, const Tensor& a, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  dispatch(out.dtype(), "clamp", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      unsupported("clamp", out.dtype());
    } else {
      using M = opmath_t<T>;
      const std::array<const Tensor*, 1> in{&a};
      if constexpr (is_floating_v<T>) {
        // PyTorch fills the result with NaN when a bound is NaN.
        if ((lo && std::isnan(lo->to_double())) || (hi && std::isnan(hi->to_double()))) {
          run<T, T>([](T) { return T(std::numeric_limits<M>::quiet_NaN()); }, out, in);
          return;
        }
      }
      // Same order of comparisons as std::min(std::max(x, lo), hi), so lo > hi gives hi like PyTorch.
      if (lo && hi) {
        const M l = lo->to<M>(), h = hi->to<M>();
        run<T, T>(
            [l, h](T x) {
              const M u = M(x);
              if (is_nan(u)) return x;
              const M r = u < l ? l : u;
              return h < r ? T(h) : T(r);
            },
            out, in);
      } else if (lo) {
        const M l = lo->to<M>();
        run<T, T>([l](T x) { const M u = M(x); return u < l ? T(l) : x; }, out, in);
      } else if (hi) {
        const M h = hi->to<M>();
        run<T, T>([h](T x) { const M u = M(x); return h < u ? T(h) : x; }, out, in);
      } else {
        run<T, T>([](T x) { return x; }, out, in);
      }
    }
  });
}

}  // namespace braid::detail
