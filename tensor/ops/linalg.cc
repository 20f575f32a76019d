// Matrix products. Every product funnels into gemm_into(c, a, b) on 2-D views; float32/float64 go to
// OpenBLAS with each operand described by its strides (row-major, or transposed when its rows are
// contiguous down the columns) so that transposed views and row slices cost no copy. CUDA tensors go to
// cuBLAS the same way (cuda::gemm: float32, float64, float16, bfloat16).
#include "tensor/ops/linalg.h"

#include <cblas.h>

#include <climits>
#include <optional>
#include <type_traits>
#include <vector>

#include "tensor/cuda/kernels.h"
#include "tensor/dispatch.h"
#include "tensor/loop.h"
#include "tensor/matrix_layout.h"

namespace braid {
namespace {


// "2x3" (PyTorch's way of printing matrix shapes in product errors).
std::string dims_str(const Tensor& t) {
  std::string s;
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (i) s += 'x';
    s += std::to_string(t.size(i));
  }
  return s;
}

void check_operands(const char* op, const Tensor& a, const Tensor& b, const char* na, const char* nb) {
  BRAID_CHECK_ARG(a.defined() && b.defined(), "{}: {} and {} must be defined tensors", op, na, nb);
  BRAID_CHECK_ARG(a.device() == b.device(),
                  "{}: expected all tensors to be on the same device, but found {} and {} ({} {}, {} {})", op,
                  a.device().str(), b.device().str(), na, a.describe(), nb, b.describe());
  BRAID_CHECK_ARG(a.dtype() == b.dtype(), "{}: expected scalar type {} but found {} ({} {}, {} {})", op,
                  torch_type_name(a.dtype()), torch_type_name(b.dtype()), na, a.describe(), nb, b.describe());
}

// --- BLAS path

struct BlasLayout {
  CBLAS_TRANSPOSE trans;
  blasint ld;
};

std::optional<BlasLayout> blas_layout(const Tensor& m) {
  const auto l = matrix_layout(m);
  if (!l) return std::nullopt;
  return BlasLayout{l->transposed ? CblasTrans : CblasNoTrans, static_cast<blasint>(l->ld)};
}

template <class T>
void blas_gemm(const Tensor& c, const Tensor& a, const Tensor& b) {
  const auto lc = blas_layout(c);
  if (!lc || c.shares_storage_with(a) || c.shares_storage_with(b)) {
    const Tensor tmp = Tensor::empty(c.shape(), c.dtype());
    blas_gemm<T>(tmp, a, b);
    c.copy_(tmp);
    return;
  }
  if (lc->trans == CblasTrans) {  // a column-major output: compute c^T = b^T a^T into it row-major
    blas_gemm<T>(c.t(), b.t(), a.t());
    return;
  }
  const BlasOperand oa = blas_operand(a), ob = blas_operand(b);
  const CBLAS_TRANSPOSE ta = oa.layout.transposed ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = ob.layout.transposed ? CblasTrans : CblasNoTrans;
  const auto lda = static_cast<blasint>(oa.layout.ld), ldb = static_cast<blasint>(ob.layout.ld);
  const auto m = static_cast<blasint>(a.size(0)), k = static_cast<blasint>(a.size(1));
  const auto n = static_cast<blasint>(b.size(1));
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, oa.tensor.data<float>(), lda, ob.tensor.data<float>(), ldb,
                0.0f, c.data<float>(), lc->ld);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, oa.tensor.data<double>(), lda, ob.tensor.data<double>(), ldb,
                0.0, c.data<double>(), lc->ld);
  }
}

// --- loop path for the dtypes BLAS does not cover

// Integers (and bool) accumulate in uint64: wrapping there and truncating gives the same bits as
// wrapping in the narrow type, without signed-overflow UB. 16-bit floats accumulate in float.
template <class T>
using gemm_acc_t = std::conditional_t<is_floating_v<T>, opmath_t<T>, uint64_t>;

template <class T>
gemm_acc_t<T> to_acc(T v) {
  if constexpr (is_floating_v<T>) return static_cast<opmath_t<T>>(v);
  else return static_cast<uint64_t>(static_cast<int64_t>(v));
}

template <class T>
T from_acc(gemm_acc_t<T> v) {
  if constexpr (std::is_same_v<T, bool>) return v != 0;
  else if constexpr (is_floating_v<T>) return T(v);
  else return static_cast<T>(v);
}

template <class T>
void loop_gemm(const Tensor& c, const Tensor& a, const Tensor& b) {
  using Acc = gemm_acc_t<T>;
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* pc = c.data<T>();
  const int64_t a0 = a.stride(0), a1 = a.stride(1), b0 = b.stride(0), b1 = b.stride(1);
  const int64_t c0 = c.stride(0), c1 = c.stride(1);
  std::vector<Acc> row(static_cast<size_t>(n));
  // i-k-j order: the inner loop streams a row of b into a row of accumulators.
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), Acc(0));
    for (int64_t kk = 0; kk < k; ++kk) {
      const Acc av = to_acc(pa[i * a0 + kk * a1]);
      const T* brow = pb + kk * b0;
      for (int64_t j = 0; j < n; ++j) row[j] += av * to_acc(brow[j * b1]);
    }
    for (int64_t j = 0; j < n; ++j) pc[i * c0 + j * c1] = from_acc<T>(row[j]);
  }
}

// c <- a x b for 2-D views of one dtype on one device; shapes already checked.
void gemm_into(const Tensor& c, const Tensor& a, const Tensor& b) {
  if (c.numel() == 0) return;
  if (a.size(1) == 0) {
    c.zero_();
    return;
  }
  BRAID_CHECK_ARG(a.size(0) <= INT_MAX && a.size(1) <= INT_MAX && b.size(1) <= INT_MAX,
                  "mm: matrix dimensions beyond 2^31-1 are not supported ({} x {})", a.describe(), b.describe());
  c.bump_version();
  if (c.is_cuda()) {
    cuda::gemm(c, a, b);
    return;
  }
  dispatch(c.dtype(), "mm", [&]<class T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      blas_gemm<T>(c, a, b);
    } else if (c.shares_storage_with(a) || c.shares_storage_with(b)) {
      const Tensor tmp = Tensor::empty(c.shape(), c.dtype());
      loop_gemm<T>(tmp, a, b);
      c.copy_(tmp);
    } else {
      loop_gemm<T>(c, a, b);
    }
  });
}

void check_mm(const char* op, const Tensor& a, const Tensor& b) {
  check_operands(op, a, b, "mat1", "mat2");
  BRAID_CHECK_ARG(a.dim() == 2, "{}: self must be a matrix, got a {}D tensor ({})", op, a.dim(), a.describe());
  BRAID_CHECK_ARG(b.dim() == 2, "{}: mat2 must be a matrix, got a {}D tensor ({})", op, b.dim(), b.describe());
  BRAID_CHECK_ARG(a.size(1) == b.size(0), "{}: mat1 and mat2 shapes cannot be multiplied ({} and {}) ({}, {})", op,
                  dims_str(a), dims_str(b), a.describe(), b.describe());
}

void check_bmm(const char* op, const Tensor& a, const Tensor& b) {
  check_operands(op, a, b, "batch1", "batch2");
  BRAID_CHECK_ARG(a.dim() == 3, "{}: batch1 must be a 3D tensor, got {} ", op, a.describe());
  BRAID_CHECK_ARG(b.dim() == 3, "{}: batch2 must be a 3D tensor, got {}", op, b.describe());
  BRAID_CHECK_ARG(a.size(0) == b.size(0) && a.size(2) == b.size(1),
                  "{}: Expected size for first two dimensions of batch2 tensor to be: [{}, {}] but got: [{}, {}]. "
                  "(batch1 {}, batch2 {})",
                  op, a.size(0), a.size(2), b.size(0), b.size(1), a.describe(), b.describe());
}

Tensor bmm_impl(const char* op, const Tensor& a, const Tensor& b) {
  check_bmm(op, a, b);
  Tensor out = Tensor::empty({a.size(0), a.size(1), b.size(2)}, TensorOptions(a.dtype(), a.device()));
  for (int64_t i = 0; i < a.size(0); ++i) gemm_into(out.select(0, i), a.select(0, i), b.select(0, i));
  return out;
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  check_mm("mm", a, b);
  Tensor out = Tensor::empty({a.size(0), b.size(1)}, TensorOptions(a.dtype(), a.device()));
  gemm_into(out, a, b);
  return out;
}

const Tensor& mm_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  check_mm("mm_out", a, b);
  BRAID_CHECK_ARG(out.defined() && out.device() == a.device(), "mm_out: out must be a defined tensor on {}, got {}",
                  a.device().str(), out.describe());
  BRAID_CHECK_ARG(out.dtype() == a.dtype(), "mm_out: expected out to have scalar type {} but found {} (out {})",
                  torch_type_name(a.dtype()), torch_type_name(out.dtype()), out.describe());
  BRAID_CHECK_ARG(out.dim() == 2 && out.size(0) == a.size(0) && out.size(1) == b.size(1),
                  "mm_out: out has shape {} but the product of {} and {} has shape [{}, {}]", shape_str(out.shape()),
                  a.describe(), b.describe(), a.size(0), b.size(1));
  gemm_into(out, a, b);
  return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) { return bmm_impl("bmm", a, b); }

Tensor dot(const Tensor& a, const Tensor& b) {
  BRAID_CHECK_ARG(a.defined() && b.defined(), "dot: arguments must be defined tensors");
  BRAID_CHECK_ARG(a.dim() == 1 && b.dim() == 1, "dot: 1D tensors expected, but got {}D and {}D tensors ({}, {})",
                  a.dim(), b.dim(), a.describe(), b.describe());
  BRAID_CHECK_ARG(a.device() == b.device(),
                  "dot: expected all tensors to be on the same device, but found {} and {} ({}, {})",
                  a.device().str(), b.device().str(), a.describe(), b.describe());
  BRAID_CHECK_ARG(a.dtype() == b.dtype(),
                  "dot: expected both vectors to have same dtype, but found {} and {} ({}, {})",
                  torch_type_name(a.dtype()), torch_type_name(b.dtype()), a.describe(), b.describe());
  BRAID_CHECK_ARG(a.size(0) == b.size(0),
                  "dot: inconsistent tensor size, expected tensor [{}] and src [{}] to have the same number of "
                  "elements, but got {} and {} elements respectively",
                  a.size(0), b.size(0), a.size(0), b.size(0));
  Tensor out = Tensor::empty({1, 1}, TensorOptions(a.dtype(), a.device()));
  gemm_into(out, a.unsqueeze(0), b.unsqueeze(1));
  return out.view({});
}

Tensor mv(const Tensor& a, const Tensor& v) {
  check_operands("mv", a, v, "mat", "vec");
  BRAID_CHECK_ARG(a.dim() == 2 && v.dim() == 1, "mv: vector + matrix @ vector expected, got {}D and {}D ({}, {})",
                  a.dim(), v.dim(), a.describe(), v.describe());
  BRAID_CHECK_ARG(a.size(1) == v.size(0), "mv: size mismatch, got mat ({}), vec ({})", dims_str(a), dims_str(v));
  Tensor out = Tensor::empty({a.size(0), 1}, TensorOptions(a.dtype(), a.device()));
  gemm_into(out, a, v.unsqueeze(1));
  return out.view({a.size(0)});
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  BRAID_CHECK_ARG(a.defined() && b.defined(), "matmul: arguments must be defined tensors");
  const int64_t da = a.dim(), db = b.dim();
  BRAID_CHECK_ARG(da >= 1 && db >= 1, "both arguments to matmul need to be at least 1D, but they are {}D and {}D",
                  da, db);
  if (da == 1 && db == 1) return dot(a, b);
  if (da == 2 && db == 1) return mv(a, b);
  if (da == 1 && db == 2) return mm(a.unsqueeze(0), b).squeeze(0);
  if (da == 2 && db == 2) return mm(a, b);
  check_operands("matmul", a, b, "mat1", "mat2");
  const Tensor a2 = da == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = db == 1 ? b.unsqueeze(1) : b;
  const int64_t n = a2.size(-2), k = a2.size(-1), m = b2.size(-1);
  BRAID_CHECK_ARG(k == b2.size(-2), "matmul: mat1 and mat2 shapes cannot be multiplied ({} and {}) ({}, {})",
                  dims_str(a), dims_str(b), a.describe(), b.describe());
  Shape out_shape;
  Tensor out;
  if (db <= 2) {
    // A stack of matrices times one matrix is one tall product: fold the batch into the rows.
    const Shape batch(a2.shape().begin(), a2.shape().end() - 2);
    // Rows spelled out: reshape cannot infer -1 when k == 0.
    out = mm(a2.reshape({shape_numel(batch) * n, k}), b2);
    out_shape = batch;
  } else {
    const Shape ba(a2.shape().begin(), a2.shape().end() - 2);
    const Shape bb(b2.shape().begin(), b2.shape().end() - 2);
    const Shape batch = detail::broadcast_shapes(ba, bb, "matmul", &a, &b);
    Shape ea = batch, eb = batch;
    ea.insert(ea.end(), {n, k});
    eb.insert(eb.end(), {k, m});
    const int64_t nb = shape_numel(batch);
    out = bmm_impl("matmul", a2.expand(ea).reshape({nb, n, k}), b2.expand(eb).reshape({nb, k, m}));
    out_shape = batch;
  }
  if (da > 1) out_shape.push_back(n);
  if (db > 1) out_shape.push_back(m);
  return out.view(out_shape);
}

}  // namespace braid
