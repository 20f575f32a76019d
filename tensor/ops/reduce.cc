// Reductions. Every op brings its input into one layout first: the kept dims (in order) followed by the
// reduced dims, made contiguous and viewed as [rows, n], so each output element is the reduction of one
// dense row. That costs at most one copy and lets the CPU kernels and cuda::reduce_rows share the plan.
#include "tensor/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/complex.h"
#include "tensor/cuda/kernels.h"
#include "tensor/dispatch.h"
#include "tensor/factory.h"

namespace braid {
namespace {


struct Plan {
  Shape out_shape;
  Shape perm;                         // kept dims, then reduced dims
  std::vector<int64_t> reduced_dims;  // wrapped, in the order given
  int64_t rows = 1;
  int64_t n = 1;
};

Plan make_plan(const Tensor& a, const Shape& dims, bool keepdim, const char* op) {
  Plan p;
  const int64_t nd = a.dim();
  std::vector<bool> reduced(static_cast<size_t>(std::max<int64_t>(nd, 1)), dims.empty());
  std::vector<bool> seen(reduced.size(), false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, nd, op);
    BRAID_CHECK_ARG(!seen[w], "{}: dim {} appears multiple times in the list of dims", op, w);
    seen[w] = true;
    reduced[w] = true;
    p.reduced_dims.push_back(w);
  }
  if (dims.empty()) {
    for (int64_t d = 0; d < nd; ++d) p.reduced_dims.push_back(d);
  }
  if (nd == 0) return p;  // a scalar reduces to itself
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduced[d]) {
      p.perm.push_back(d);
      p.rows *= a.size(d);
      p.out_shape.push_back(a.size(d));
    } else if (keepdim) {
      p.out_shape.push_back(1);
    }
  }
  for (int64_t d = 0; d < nd; ++d) {
    if (reduced[d]) {
      p.perm.push_back(d);
      p.n *= a.size(d);
    }
  }
  return p;
}

// The input as a contiguous [rows, n] tensor of dtype `dt` on its own device.
Tensor prepare(const Tensor& a, const Plan& p, DType dt) {
  Tensor t = a.dim() > 0 ? a.permute(p.perm) : a;
  t = t.dtype() == dt ? t.contiguous() : t.to(dt);
  return t.view({p.rows, p.n});
}

// max/min/amax/amin have no identity, so an empty reduction is an error (as in PyTorch).
void check_nonempty(const Tensor& a, const Plan& p, bool all_dims, const char* op) {
  if (a.numel() != 0) return;
  BRAID_CHECK_ARG(!all_dims,
                  "{}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction "
                  "dim with the 'dim' argument. (input {})",
                  op, a.describe());
  for (int64_t d : p.reduced_dims) {
    BRAID_CHECK_ARG(a.size(d) != 0, "{}(): Expected reduction dim {} to have non-zero size. (input {})", op, d,
                    a.describe());
  }
}

void check_floating(const Tensor& a, const char* op) {
  BRAID_CHECK_ARG(is_floating(a.dtype()),
                  "{}(): could not infer output dtype. Input dtype must be either a floating point or complex "
                  "dtype. Got: {}",
                  op, torch_type_name(a.dtype()));
}

// --- row kernels (contiguous rows of length n)

// The accumulator of floating sums: float32 sums in double so that million-element sums keep float32
// accuracy, 16-bit floats in float (rounded once at the end).
template <class T> struct SumAcc { using type = double; };
template <> struct SumAcc<Half> { using type = float; };
template <> struct SumAcc<BFloat16> { using type = float; };
template <class T> using sum_acc_t = typename SumAcc<T>::type;

// Pairwise summation over blocks of eight independent partial sums: O(log n) error growth, and the
// independent lanes let the compiler keep several additions in flight.
template <class Acc, class T, class F>
Acc pairwise_sum(const T* x, int64_t n, const F& f) {
  if (n <= 256) {
    Acc s[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int k = 0; k < 8; ++k) s[k] += f(x[i + k]);
    }
    Acc tail = 0;
    for (; i < n; ++i) tail += f(x[i]);
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + tail;
  }
  const int64_t half = (n / 2 + 7) / 8 * 8;
  return pairwise_sum<Acc>(x, half, f) + pairwise_sum<Acc>(x + half, n - half, f);
}

template <class T>
bool is_nan(T v) {
  if constexpr (is_floating_v<T>) return std::isnan(static_cast<opmath_t<T>>(v));
  else return false;
}

template <class T>
T row_sum(const T* x, int64_t n) {
  if constexpr (is_floating_v<T>) {
    using Acc = sum_acc_t<T>;
    return T(static_cast<opmath_t<T>>(pairwise_sum<Acc>(x, n, [](T v) { return static_cast<Acc>(v); })));
  } else if constexpr (std::is_same_v<T, bool>) {
    bool r = false;
    for (int64_t i = 0; i < n; ++i) r = r || x[i];
    return r;
  } else {
    uint64_t s = 0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<uint64_t>(static_cast<int64_t>(x[i]));
    return static_cast<T>(s);
  }
}

template <class T>
T row_prod(const T* x, int64_t n) {
  if constexpr (is_floating_v<T>) {
    opmath_t<T> r = 1;
    for (int64_t i = 0; i < n; ++i) r *= static_cast<opmath_t<T>>(x[i]);
    return T(r);
  } else if constexpr (std::is_same_v<T, bool>) {
    bool r = true;
    for (int64_t i = 0; i < n; ++i) r = r && x[i];
    return r;
  } else {
    uint64_t r = 1;
    for (int64_t i = 0; i < n; ++i) r *= static_cast<uint64_t>(static_cast<int64_t>(x[i]));
    return static_cast<T>(r);
  }
}

// Index of the first max (or min) of a non-empty row; the first NaN wins over everything.
template <class T>
int64_t row_arg_extreme(const T* x, int64_t n, bool is_max) {
  using M = opmath_t<T>;
  int64_t best_i = 0;
  M best = static_cast<M>(x[0]);
  if (is_nan(x[0])) return 0;
  for (int64_t i = 1; i < n; ++i) {
    const M v = static_cast<M>(x[i]);
    if (is_nan(x[i])) return i;
    if (is_max ? v > best : v < best) {
      best = v;
      best_i = i;
    }
  }
  return best_i;
}

template <class T>
T row_norm(const T* x, int64_t n, double p) {
  using Acc = sum_acc_t<T>;
  using M = opmath_t<T>;
  if (std::isinf(p)) {
    Acc r = p > 0 ? Acc(0) : std::numeric_limits<Acc>::infinity();
    for (int64_t i = 0; i < n; ++i) {
      const Acc v = std::abs(static_cast<Acc>(x[i]));
      if (std::isnan(v)) return T(static_cast<M>(v));
      r = p > 0 ? std::max(r, v) : std::min(r, v);
    }
    return T(static_cast<M>(r));
  }
  Acc r;
  if (p == 0) {
    r = pairwise_sum<Acc>(x, n, [](T v) { return static_cast<Acc>(static_cast<M>(v) != M(0)); });
  } else if (p == 1) {
    r = pairwise_sum<Acc>(x, n, [](T v) { return std::abs(static_cast<Acc>(v)); });
  } else if (p == 2) {
    r = std::sqrt(pairwise_sum<Acc>(x, n, [](T v) { return static_cast<Acc>(v) * static_cast<Acc>(v); }));
  } else {
    const Acc pa = static_cast<Acc>(p);
    r = std::pow(pairwise_sum<Acc>(x, n, [pa](T v) { return std::pow(std::abs(static_cast<Acc>(v)), pa); }),
                 Acc(1) / pa);
  }
  return T(static_cast<M>(r));
}

// Runs `kernel(row_ptr, n) -> O` for every row of the prepared [rows, n] input into a fresh output.
template <class T, class O, class K>
void for_rows(const Tensor& in, const Tensor& out, const K& kernel) {
  const T* x = in.data<T>();
  O* o = out.data<O>();
  const int64_t rows = in.size(0), n = in.size(1);
  for (int64_t r = 0; r < rows; ++r) o[r] = kernel(x + r * n, n);
}

// The shared front end of the value reductions: `dt` is both the compute and the result dtype.
Tensor reduce(ReduceKind kind, const Tensor& a, const Shape& dims, bool keepdim, DType dt, const char* op,
              double p = 0.0) {
  const Plan plan = make_plan(a, dims, keepdim, op);
  if (kind == ReduceKind::Max || kind == ReduceKind::Min) check_nonempty(a, plan, dims.empty(), op);
  if (kind == ReduceKind::NormP && std::isinf(p) && plan.n == 0 && plan.rows != 0) {
    BRAID_THROW(InvalidArgument,
                "{}: cannot compute the {} norm on an empty tensor because the operation does not have an "
                "identity (input {})",
                op, p > 0 ? "inf" : "-inf", a.describe());
  }
  const DType in_dt = (kind == ReduceKind::All || kind == ReduceKind::Any) ? DType::Bool : dt;
  Tensor out = Tensor::empty(plan.out_shape, TensorOptions(dt, a.device()));
  if (plan.rows == 0) return out;
  const Tensor in = prepare(a, plan, in_dt);
  if (a.is_cuda()) {
    if (plan.n == 0) {
      out.fill_(kind == ReduceKind::Prod || kind == ReduceKind::All ? 1 : 0);
      return out;
    }
    cuda::reduce_rows(kind, out.view({plan.rows}), in, p);
    return out;
  }
  dispatch(in_dt, op, [&]<class T>() {
    switch (kind) {
      case ReduceKind::Sum: for_rows<T, T>(in, out, [](const T* x, int64_t n) { return row_sum(x, n); }); break;
      case ReduceKind::Prod: for_rows<T, T>(in, out, [](const T* x, int64_t n) { return row_prod(x, n); }); break;
      case ReduceKind::Max:
      case ReduceKind::Min: {
        const bool is_max = kind == ReduceKind::Max;
        for_rows<T, T>(in, out, [is_max](const T* x, int64_t n) { return x[row_arg_extreme(x, n, is_max)]; });
        break;
      }
      case ReduceKind::NormP:
        if constexpr (is_floating_v<T>) {
          for_rows<T, T>(in, out, [p](const T* x, int64_t n) { return row_norm(x, n, p); });
        }
        break;
      case ReduceKind::All:
      case ReduceKind::Any: {
        // The input was converted to bool, so a row is all/any of its bytes.
        const bool want = kind == ReduceKind::Any;
        for_rows<T, bool>(in, out, [want](const T* x, int64_t n) {
          for (int64_t i = 0; i < n; ++i) {
            if (static_cast<bool>(x[i]) == want) return want;
          }
          return !want;
        });
        break;
      }
    }
  });
  return out;
}

// max/min/argmax/argmin over one prepared [rows, n] input; values may be null (argmax/argmin).
void arg_reduce(bool is_max, const Tensor& in, const Tensor* values, const Tensor& indices) {
  const int64_t rows = in.size(0);
  if (rows == 0) return;
  if (in.is_cuda()) {
    cuda::arg_reduce_rows(is_max, indices.view({rows}), in);
    if (values) cuda::reduce_rows(is_max ? ReduceKind::Max : ReduceKind::Min, values->view({rows}), in, 0.0);
    return;
  }
  dispatch(in.dtype(), is_max ? "argmax" : "argmin", [&]<class T>() {
    const T* x = in.data<T>();
    const int64_t n = in.size(1);
    int64_t* idx = indices.data<int64_t>();
    T* val = values ? values->data<T>() : nullptr;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = row_arg_extreme(x + r * n, n, is_max);
      idx[r] = i;
      if (val) val[r] = x[r * n + i];
    }
  });
}

ValuesIndices max_min_dim(const Tensor& a, int64_t dim, bool keepdim, bool is_max) {
  const char* op = is_max ? "max" : "min";
  const Plan plan = make_plan(a, {dim}, keepdim, op);
  check_nonempty(a, plan, false, op);
  ValuesIndices r;
  r.values = Tensor::empty(plan.out_shape, TensorOptions(a.dtype(), a.device()));
  r.indices = Tensor::empty(plan.out_shape, TensorOptions(DType::Int64, a.device()));
  if (plan.rows == 0) return r;
  arg_reduce(is_max, prepare(a, plan, a.dtype()), &r.values, r.indices);
  return r;
}

Tensor arg_extreme(const Tensor& a, std::optional<int64_t> dim, bool keepdim, bool is_max) {
  const char* op = is_max ? "argmax" : "argmin";
  if (dim) {
    const Plan plan = make_plan(a, {*dim}, keepdim, op);
    check_nonempty(a, plan, false, op);
    Tensor idx = Tensor::empty(plan.out_shape, TensorOptions(DType::Int64, a.device()));
    if (plan.rows > 0) arg_reduce(is_max, prepare(a, plan, a.dtype()), nullptr, idx);
    return idx;
  }
  // Over the flattened tensor; keepdim keeps every dim as size 1.
  BRAID_CHECK_ARG(a.numel() != 0,
                  "{}(): Expected reduction dim to be specified for input.numel() == 0. (input {})", op,
                  a.describe());
  Tensor idx = Tensor::empty(keepdim ? Shape(static_cast<size_t>(a.dim()), 1) : Shape{},
                             TensorOptions(DType::Int64, a.device()));
  arg_reduce(is_max, a.contiguous().view({1, a.numel()}), nullptr, idx);
  return idx;
}

DType sum_dtype(const Tensor& a, std::optional<DType> dtype) {
  if (dtype) return *dtype;
  return is_integral(a.dtype(), true) ? DType::Int64 : a.dtype();
}

// A complex sum or mean is that of the real and imaginary parts separately: reduce view_as_real(a) over
// the same dims (wrapped against a, so the trailing parts dim is never among them) and view the result
// as complex again.
template <class F>
Tensor over_parts(const Tensor& a, const Shape& dims, bool keepdim, const char* op, const F& reduce_parts) {
  Shape wrapped;
  for (int64_t d : dims) wrapped.push_back(wrap_dim(d, a.dim(), op));
  if (dims.empty()) {
    for (int64_t d = 0; d < a.dim(); ++d) wrapped.push_back(d);
  }
  if (wrapped.empty()) return a.clone();  // a 0-dim tensor reduces to itself
  const Tensor parts = reduce_parts(view_as_real(a), wrapped, keepdim);
  return view_as_complex(parts.contiguous());
}

}  // namespace

Tensor sum(const Tensor& a, const Shape& dims, bool keepdim, std::optional<DType> dtype) {
  if (is_complex(a.dtype()) && (!dtype || *dtype == a.dtype())) {
    return over_parts(a, dims, keepdim, "sum", [](const Tensor& p, const Shape& d, bool k) { return sum(p, d, k); });
  }
  return reduce(ReduceKind::Sum, a, dims, keepdim, sum_dtype(a, dtype), "sum");
}

Tensor mean(const Tensor& a, const Shape& dims, bool keepdim) {
  if (is_complex(a.dtype())) {
    return over_parts(a, dims, keepdim, "mean", [](const Tensor& p, const Shape& d, bool k) { return mean(p, d, k); });
  }
  check_floating(a, "mean");
  const Plan plan = make_plan(a, dims, keepdim, "mean");
  if (a.is_cuda()) {
    // 16-bit means sum and divide in float32 and round once at the end, as on the CPU.
    const DType acc = element_size(a.dtype()) == 2 ? DType::Float32 : a.dtype();
    Tensor s = reduce(ReduceKind::Sum, a, dims, keepdim, acc, "mean");
    if (s.numel() == 0) return s.to(a.dtype());
    const Tensor count = full({}, static_cast<double>(plan.n), TensorOptions(acc, a.device()));
    cuda::binary(BinaryOp::Div, s, s, count.expand(s.shape()), 1);
    return s.to(a.dtype());
  }
  // On the CPU the division happens in the accumulator type, so 16-bit means round once.
  Tensor out = Tensor::empty(plan.out_shape, a.dtype());
  if (plan.rows == 0) return out;
  const Tensor in = prepare(a, plan, a.dtype());
  dispatch_floating(a.dtype(), "mean", [&]<class T>() {
    using Acc = sum_acc_t<T>;
    for_rows<T, T>(in, out, [](const T* x, int64_t n) {
      const Acc s = pairwise_sum<Acc>(x, n, [](T v) { return static_cast<Acc>(v); });
      return T(static_cast<opmath_t<T>>(s / static_cast<Acc>(n)));
    });
  });
  return out;
}

Tensor prod(const Tensor& a, const Shape& dims, bool keepdim) {
  return reduce(ReduceKind::Prod, a, dims, keepdim, sum_dtype(a, std::nullopt), "prod");
}

Tensor norm(const Tensor& a, double p, const Shape& dims, bool keepdim) {
  check_floating(a, "norm");
  return reduce(ReduceKind::NormP, a, dims, keepdim, a.dtype(), "norm", p);
}

Tensor amax(const Tensor& a, const Shape& dims, bool keepdim) {
  return reduce(ReduceKind::Max, a, dims, keepdim, a.dtype(), "amax");
}

Tensor amin(const Tensor& a, const Shape& dims, bool keepdim) {
  return reduce(ReduceKind::Min, a, dims, keepdim, a.dtype(), "amin");
}

Tensor all(const Tensor& a, const Shape& dims, bool keepdim) {
  return reduce(ReduceKind::All, a, dims, keepdim, DType::Bool, "all");
}

Tensor any(const Tensor& a, const Shape& dims, bool keepdim) {
  return reduce(ReduceKind::Any, a, dims, keepdim, DType::Bool, "any");
}

ValuesIndices max(const Tensor& a, int64_t dim, bool keepdim) { return max_min_dim(a, dim, keepdim, true); }
ValuesIndices min(const Tensor& a, int64_t dim, bool keepdim) { return max_min_dim(a, dim, keepdim, false); }

Tensor max(const Tensor& a) { return reduce(ReduceKind::Max, a, {}, false, a.dtype(), "max"); }
Tensor min(const Tensor& a) { return reduce(ReduceKind::Min, a, {}, false, a.dtype(), "min"); }

Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(a, dim, keepdim, true);
}

Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(a, dim, keepdim, false);
}

}  // namespace braid
