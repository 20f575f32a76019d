// Sparse COO tensors. The work is done on contiguous host copies with plain loops (dispatching on the
// dtype); results go back to the device of the values.
#include "tensor/sparse.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "tensor/dispatch.h"
#include "tensor/ops/elementwise.h"

namespace braid {
namespace {

Tensor host(const Tensor& t) { return t.cpu().contiguous(); }

// The trailing dense part of a values shape [nnz, dense...].
Shape dense_part(const Tensor& values) { return Shape(values.shape().begin() + 1, values.shape().end()); }

// [n, rest...]
Shape with_leading(int64_t n, const Shape& rest) {
  Shape out = {n};
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

// The accumulator type: float for the 16-bit floats, the element type otherwise.
template <class T>
using acc_t = std::conditional_t<is_floating_v<T>, opmath_t<T>, T>;

// a + b in the accumulator type: logical or for bool, wrapping for integers.
template <class A>
A acc_add(A a, A b) {
  if constexpr (std::is_same_v<A, bool>) {
    return a || b;
  } else if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

// Lexicographic comparison of columns a and b of a [sparse_dim, nnz] index array (= linearised order).
int compare_columns(const int64_t* idx, int64_t sparse_dim, int64_t nnz, int64_t a, int64_t b) {
  for (int64_t d = 0; d < sparse_dim; ++d) {
    const int64_t x = idx[d * nnz + a], y = idx[d * nnz + b];
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

}  // namespace

SparseTensor::SparseTensor(Tensor indices, Tensor values, Shape size, bool is_coalesced)
    : indices_(std::move(indices)), values_(std::move(values)), size_(std::move(size)), coalesced_(is_coalesced) {
  BRAID_CHECK_ARG(indices_.defined(), "SparseTensor: indices are undefined");
  BRAID_CHECK_ARG(values_.defined(), "SparseTensor: values are undefined");
  BRAID_CHECK_ARG(indices_.dtype() == DType::Int64, "SparseTensor: indices must be int64, got {}",
                  indices_.describe());
  BRAID_CHECK_ARG(indices_.dim() == 2, "SparseTensor: indices must be 2-D [sparse_dim, nnz], got {}",
                  indices_.describe());
  BRAID_CHECK_ARG(values_.dim() >= 1, "SparseTensor: values must have at least 1 dimension [nnz, ...], got {}",
                  values_.describe());
  BRAID_CHECK_ARG(indices_.device() == values_.device(),
                  "SparseTensor: indices ({}) and values ({}) are on different devices", indices_.describe(),
                  values_.describe());
  const int64_t sd = indices_.size(0);
  const int64_t nnz = indices_.size(1);
  BRAID_CHECK_ARG(values_.size(0) == nnz,
                  "SparseTensor: indices {} give nnz = {} but values {} have {} entries", indices_.describe(),
                  nnz, values_.describe(), values_.size(0));
  const int64_t dd = values_.dim() - 1;
  BRAID_CHECK_ARG(sd + dd == static_cast<int64_t>(size_.size()),
                  "SparseTensor: sparse_dim ({}) + dense_dim ({}) must equal the number of dimensions of size {}",
                  sd, dd, shape_str(size_));
  // to_tensor() gives the sparse tensor the contiguous strides of its size: products of the sizes (a 0
  // counted as 1) that must fit in int64, as Tensor::empty requires of a dense shape.
  int64_t extent = 1;
  for (int64_t s : size_) {
    BRAID_CHECK_ARG(s >= 0, "SparseTensor: negative dimension in size {}", shape_str(size_));
    BRAID_CHECK_ARG(!__builtin_mul_overflow(extent, std::max<int64_t>(s, 1), &extent),
                    "SparseTensor: size {} is too large: its sizes (a 0 counted as 1) multiply past 2^63 - 1",
                    shape_str(size_));
  }
  for (int64_t j = 0; j < dd; ++j) {
    BRAID_CHECK_ARG(values_.size(j + 1) == size_[static_cast<size_t>(sd + j)],
                    "SparseTensor: values {} have dense sizes {} but size {} has {} after the {} sparse dims",
                    values_.describe(), shape_str(dense_part(values_)), shape_str(size_),
                    shape_str(Shape(size_.begin() + sd, size_.end())), sd);
  }
  const Tensor idx_host = host(indices_);
  const int64_t* idx = idx_host.data<int64_t>();
  for (int64_t d = 0; d < sd; ++d) {
    const int64_t n = size_[static_cast<size_t>(d)];
    for (int64_t k = 0; k < nnz; ++k) {
      const int64_t i = idx[d * nnz + k];
      BRAID_CHECK_ARG(i >= 0 && i < n,
                      "SparseTensor: index {} of entry {} is out of bounds for dimension {} of size {} (size {})", i,
                      k, d, n, shape_str(size_));
    }
  }
  if (coalesced_) {
    for (int64_t k = 1; k < nnz; ++k) {
      BRAID_CHECK_ARG(compare_columns(idx, sd, nnz, k - 1, k) < 0,
                      "SparseTensor: is_coalesced was given but entries {} and {} are not in strictly increasing "
                      "index order",
                      k - 1, k);
    }
  }
}

SparseTensor SparseTensor::coalesce() const {
  BRAID_CHECK_ARG(defined(), "coalesce: undefined sparse tensor");
  if (coalesced_) return *this;
  const Tensor idx_host = host(indices_);
  const Tensor val_host = host(values_);
  const int64_t sd = sparse_dim();
  const int64_t n = nnz();
  const int64_t* idx = idx_host.data<int64_t>();
  const Shape dense = dense_part(values_);
  const int64_t row = shape_numel(dense);

  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return compare_columns(idx, sd, n, a, b) < 0; });
  // Start of each group of equal indices in `order`.
  std::vector<int64_t> starts;
  for (int64_t k = 0; k < n; ++k) {
    if (k == 0 || compare_columns(idx, sd, n, order[k - 1], order[k]) != 0) starts.push_back(k);
  }
  const auto groups = static_cast<int64_t>(starts.size());
  starts.push_back(n);

  Tensor out_idx = Tensor::empty({sd, groups}, DType::Int64);
  int64_t* oi = out_idx.data<int64_t>();
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t d = 0; d < sd; ++d) oi[d * groups + g] = idx[d * n + order[starts[g]]];
  }
  Tensor out_val = Tensor::empty(with_leading(groups, dense), dtype());
  dispatch(dtype(), "coalesce", [&]<class T>() {
    using A = acc_t<T>;
    const T* in = val_host.data<T>();
    T* out = out_val.data<T>();
    std::vector<A> acc(static_cast<size_t>(row));
    for (int64_t g = 0; g < groups; ++g) {
      std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t k = starts[g]; k < starts[g + 1]; ++k) {
        const T* src = in + order[k] * row;
        for (int64_t j = 0; j < row; ++j) acc[j] = acc_add<A>(acc[j], static_cast<A>(src[j]));
      }
      for (int64_t j = 0; j < row; ++j) out[g * row + j] = static_cast<T>(acc[j]);
    }
  });
  return SparseTensor(out_idx.to(values_.device()), out_val.to(values_.device()), size_, true);
}

Tensor SparseTensor::to_dense() const {
  BRAID_CHECK_ARG(defined(), "to_dense: undefined sparse tensor");
  const SparseTensor c = coalesce();
  const Tensor idx_host = host(c.indices_);
  const Tensor val_host = host(c.values_);
  const int64_t sd = sparse_dim();
  const int64_t n = c.nnz();
  const int64_t row = shape_numel(dense_part(values_));
  const int64_t* idx = idx_host.data<int64_t>();
  const Shape strides = contiguous_strides(size_);
  Tensor out = Tensor::empty(size_, dtype());
  out.zero_();
  const size_t row_bytes = static_cast<size_t>(row) * out.element_size();
  auto* dst = static_cast<char*>(out.data_ptr());
  const auto* src = static_cast<const char*>(val_host.data_ptr());
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = 0;
    for (int64_t d = 0; d < sd; ++d) off += idx[d * n + k] * strides[static_cast<size_t>(d)];
    if (row_bytes > 0) {
      std::memcpy(dst + off * static_cast<int64_t>(out.element_size()), src + k * static_cast<int64_t>(row_bytes),
                  row_bytes);
    }
  }
  return out.to(values_.device());
}

SparseTensor SparseTensor::add(const SparseTensor& other) const {
  BRAID_CHECK_ARG(defined() && other.defined(), "add: undefined sparse tensor operand");
  BRAID_CHECK_ARG(size_ == other.size_, "add: sparse tensors have different shapes {} and {}", shape_str(size_),
                  shape_str(other.size_));
  BRAID_CHECK_ARG(sparse_dim() == other.sparse_dim(),
                  "add: sparse tensors of shape {} have different sparse_dim ({} and {})", shape_str(size_),
                  sparse_dim(), other.sparse_dim());
  BRAID_CHECK_ARG(values_.device() == other.values_.device(), "add: sparse tensors on different devices ({} and {})",
                  values_.device(), other.values_.device());
  const DType rd = promote_types(dtype(), other.dtype());
  const Tensor ia = host(indices_), ib = host(other.indices_);
  const Tensor va = host(values_.to(rd)), vb = host(other.values_.to(rd));
  const int64_t sd = sparse_dim();
  const int64_t na = nnz(), nb = other.nnz();
  Tensor idx = Tensor::empty({sd, na + nb}, DType::Int64);
  int64_t* pi = idx.data<int64_t>();
  const int64_t* pa = ia.data<int64_t>();
  const int64_t* pb = ib.data<int64_t>();
  for (int64_t d = 0; d < sd; ++d) {
    std::copy(pa + d * na, pa + (d + 1) * na, pi + d * (na + nb));
    std::copy(pb + d * nb, pb + (d + 1) * nb, pi + d * (na + nb) + na);
  }
  Tensor val = Tensor::empty(with_leading(na + nb, dense_part(values_)), rd);
  auto* pv = static_cast<char*>(val.data_ptr());
  if (va.nbytes() > 0) std::memcpy(pv, va.data_ptr(), va.nbytes());
  if (vb.nbytes() > 0) std::memcpy(pv + va.nbytes(), vb.data_ptr(), vb.nbytes());
  const Device dev = values_.device();
  return SparseTensor(idx.to(dev), val.to(dev), size_, false).coalesce();
}

Tensor SparseTensor::add_to_dense(const Tensor& dense) const {
  BRAID_CHECK_ARG(defined(), "add_to_dense: undefined sparse tensor");
  BRAID_CHECK_ARG(dense.defined(), "add_to_dense: undefined dense tensor");
  BRAID_CHECK_ARG(dense.shape() == size_, "add_to_dense: dense tensor {} does not match the sparse shape {}",
                  dense.describe(), shape_str(size_));
  const DType rd = promote_types(dense.dtype(), dtype());
  Tensor out = Tensor::empty(size_, rd);
  out.copy_(dense);
  const SparseTensor c = coalesce();
  const Tensor idx_host = host(c.indices_);
  const Tensor val_host = host(c.values_.to(rd));
  const int64_t sd = sparse_dim();
  const int64_t n = c.nnz();
  const int64_t row = shape_numel(dense_part(values_));
  const int64_t* idx = idx_host.data<int64_t>();
  const Shape strides = contiguous_strides(size_);
  dispatch(rd, "add_to_dense", [&]<class T>() {
    using A = acc_t<T>;
    T* o = out.data<T>();
    const T* v = val_host.data<T>();
    for (int64_t k = 0; k < n; ++k) {
      int64_t off = 0;
      for (int64_t d = 0; d < sd; ++d) off += idx[d * n + k] * strides[static_cast<size_t>(d)];
      for (int64_t j = 0; j < row; ++j) {
        o[off + j] = static_cast<T>(acc_add<A>(static_cast<A>(o[off + j]), static_cast<A>(v[k * row + j])));
      }
    }
  });
  return out.to(dense.device());
}

SparseTensor SparseTensor::mul(Scalar factor) const {
  BRAID_CHECK_ARG(defined(), "mul: undefined sparse tensor");
  const DType rd = factor.result_dtype_with(dtype());
  Tensor val = Tensor::empty(values_.shape(), rd);
  val.copy_(values_);
  dispatch(rd, "mul", [&]<class T>() {
    T* p = val.data<T>();
    const int64_t n = val.numel();
    if constexpr (std::is_same_v<T, bool>) {
      const bool f = factor.to<bool>();
      for (int64_t i = 0; i < n; ++i) p[i] = p[i] && f;
    } else if constexpr (is_floating_v<T>) {
      const auto f = static_cast<opmath_t<T>>(factor.to_double());
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<opmath_t<T>>(p[i]) * f);
    } else {
      using U = std::make_unsigned_t<T>;
      const auto f = static_cast<U>(factor.to<T>());
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<U>(static_cast<U>(p[i]) * f));
    }
  });
  return SparseTensor(indices_.clone(), val.to(values_.device()), size_, coalesced_);
}

SparseTensor SparseTensor::from_dense(const Tensor& dense) {
  BRAID_CHECK_ARG(dense.defined(), "from_dense: undefined tensor");
  const Tensor h = host(dense);
  const int64_t nd = h.dim();
  const Shape strides = contiguous_strides(h.shape());
  const int64_t total = h.numel();
  std::vector<int64_t> nonzero;
  dispatch(h.dtype(), "from_dense", [&]<class T>() {
    const T* p = h.data<T>();
    for (int64_t i = 0; i < total; ++i) {
      if (static_cast<acc_t<T>>(p[i]) != acc_t<T>(0)) nonzero.push_back(i);  // NaN counts as non-zero
    }
  });
  const auto n = static_cast<int64_t>(nonzero.size());
  Tensor idx = Tensor::empty({nd, n}, DType::Int64);
  Tensor val = Tensor::empty({n}, h.dtype());
  int64_t* pi = idx.data<int64_t>();
  const size_t es = h.element_size();
  const auto* src = static_cast<const char*>(h.data_ptr());
  auto* dst = static_cast<char*>(val.data_ptr());
  for (int64_t k = 0; k < n; ++k) {
    int64_t rest = nonzero[static_cast<size_t>(k)];
    for (int64_t d = 0; d < nd; ++d) {
      pi[d * n + k] = rest / strides[static_cast<size_t>(d)];
      rest %= strides[static_cast<size_t>(d)];
    }
    std::memcpy(dst + k * static_cast<int64_t>(es), src + nonzero[static_cast<size_t>(k)] * static_cast<int64_t>(es),
                es);
  }
  return SparseTensor(idx.to(dense.device()), val.to(dense.device()), dense.shape(), true);
}

std::string SparseTensor::describe() const {
  if (!defined()) return "undefined sparse tensor";
  return fmt::format("sparse {}{} {} (sparse_dim {}, dense_dim {}, nnz {}{})", dtype(), shape_str(size_),
                     values_.device(), sparse_dim(), dense_dim(), nnz(), coalesced_ ? ", coalesced" : "");
}

Tensor SparseTensor::to_tensor() const {
  BRAID_CHECK_ARG(defined(), "SparseTensor::to_tensor: undefined sparse tensor");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = values_.storage();
  impl->sizes = size_;
  impl->strides = contiguous_strides(size_);
  impl->offset = 0;
  impl->dtype = values_.dtype();
  impl->sparse = std::make_shared<const SparseTensor>(*this);
  return Tensor(std::move(impl));
}

Tensor add_maybe_sparse(const Tensor& a, const Tensor& b) {
  if (a.is_sparse() && b.is_sparse()) return a.sparse().add(b.sparse()).to_tensor();
  if (a.is_sparse()) return a.sparse().add_to_dense(b);
  if (b.is_sparse()) return b.sparse().add_to_dense(a);
  return braid::add(a, b);
}

}  // namespace braid
