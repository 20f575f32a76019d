// Joining, splitting and indexing. cat/stack/split/chunk are views plus copy_, so they work on any device
// and dtype that copy_ supports. The indexing ops check every index value on the host (a CUDA index is
// read back first), then run on the operands' device (tensor/cuda/kernels.h on CUDA).
#include "tensor/ops/shape_ops.h"

#include <cstring>

#include "tensor/cuda/kernels.h"
#include "tensor/dispatch.h"
#include "tensor/loop.h"

namespace braid {
namespace {

std::string sizes_list(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

// PyTorch's words for operands on different devices.
void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  BRAID_CHECK_ARG(a.device() == b.device(),
                  "{}(): Expected all tensors to be on the same device, but found at least two devices, {} and {}!",
                  op, a.device(), b.device());
}

void check_index_dtype(const char* op, const Tensor& index) {
  BRAID_CHECK_ARG(index.dtype() == DType::Int64 || index.dtype() == DType::Int32,
                  "{}(): Expected dtype int64 (or int32) for index, got {}", op, index.describe());
}

// Index values of an int64/int32 index tensor in row-major order (a CUDA index is read back: every
// value is checked on the host before a kernel trusts it).
std::vector<int64_t> index_values(const Tensor& index) {
  const Tensor c = index.cpu().contiguous();
  std::vector<int64_t> v(static_cast<size_t>(c.numel()));
  if (c.dtype() == DType::Int64) {
    if (!v.empty()) std::memcpy(v.data(), c.data_ptr(), v.size() * sizeof(int64_t));
  } else {
    const int32_t* p = c.data<int32_t>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  }
  return v;
}

void check_in_range(const char* op, int64_t idx, int64_t dim, int64_t size) {
  BRAID_CHECK_ARG(idx >= 0 && idx < size, "{}(): index {} is out of bounds for dimension {} with size {}", op,
                  idx, dim, size);
}

int64_t read_index(const char* p, DType dt) {
  return dt == DType::Int64 ? *reinterpret_cast<const int64_t*>(p) : *reinterpret_cast<const int32_t*>(p);
}

// self/src geometry checks shared by gather and scatter_add (PyTorch's rules).
void check_scatter_gather_shapes(const char* op, const Tensor& self, int64_t dim, const Tensor& index,
                                 const Tensor* src) {
  BRAID_CHECK_ARG(index.dim() == self.dim() || (index.dim() <= 1 && self.dim() <= 1 && index.numel() <= 1),
                  "{}(): Index tensor must have the same number of dimensions as input tensor ({} vs {})", op,
                  index.describe(), self.describe());
  for (int64_t d = 0; d < index.dim(); ++d) {
    BRAID_CHECK_ARG(d == dim || index.size(d) <= self.size(d),
                    "{}(): Size does not match at dimension {} expected index {} to be smaller than self {} apart "
                    "from dimension {}",
                    op, d, shape_str(index.shape()), shape_str(self.shape()), dim);
    if (src) {
      BRAID_CHECK_ARG(index.size(d) <= src->size(d),
                      "{}(): Expected index {} to be smaller than self {} apart from dimension {} and to be smaller "
                      "size than src {}",
                      op, shape_str(index.shape()), shape_str(self.shape()), dim, shape_str(src->shape()));
    }
  }
}

// Element strides of `t` viewed over index's shape, with `dim` zeroed (the index supplies that offset).
Shape strides_without_dim(const Tensor& t, int64_t dim, size_t ndim) {
  Shape s(ndim, 0);
  for (size_t d = 0; d < ndim && d < static_cast<size_t>(t.dim()); ++d) {
    s[d] = static_cast<int64_t>(d) == dim ? 0 : t.strides()[d];
  }
  return s;
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  BRAID_CHECK_ARG(!tensors.empty(), "torch.cat(): expected a non-empty list of Tensors");
  const Tensor* ref = nullptr;
  DType dtype = tensors[0].dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    BRAID_CHECK_ARG(t.defined(), "torch.cat(): tensor number {} in the list is undefined", i);
    BRAID_CHECK_ARG(t.dim() > 0, "torch.cat(): zero-dimensional tensor (at position {}) cannot be concatenated", i);
    BRAID_CHECK_ARG(t.device() == tensors[0].device(),
                    "torch.cat(): Expected all tensors to be on the same device, but found at least two devices, "
                    "{} and {}!",
                    tensors[0].device(), t.device());
    dtype = promote_types(dtype, t.dtype());
    if (!ref && !(t.dim() == 1 && t.size(0) == 0)) ref = &t;
  }
  if (!ref) return Tensor::empty({0}, TensorOptions(dtype, tensors[0].device()));
  const int64_t d = wrap_dim(dim, ref->dim(), "torch.cat()");
  Shape out_shape = ref->shape();
  out_shape[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.dim() == 1 && t.size(0) == 0) continue;  // legacy: 1-D empty tensors are skipped
    BRAID_CHECK_ARG(t.dim() == ref->dim(),
                    "torch.cat(): Tensors must have same number of dimensions: got {} and {} (tensor number {})",
                    ref->dim(), t.dim(), i);
    for (int64_t k = 0; k < t.dim(); ++k) {
      BRAID_CHECK_ARG(k == d || t.size(k) == ref->size(k),
                      "torch.cat(): Sizes of tensors must match except in dimension {}. Expected size {} but got "
                      "size {} for tensor number {} in the list.",
                      d, ref->size(k), t.size(k), i);
    }
    out_shape[d] += t.size(d);
  }
  Tensor out = Tensor::empty(out_shape, TensorOptions(dtype, ref->device()));
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (t.dim() == 1 && t.size(0) == 0) continue;
    if (t.size(d) > 0) out.narrow(d, offset, t.size(d)).copy_(t);
    offset += t.size(d);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  BRAID_CHECK_ARG(!tensors.empty(), "stack expects a non-empty TensorList");
  for (size_t i = 0; i < tensors.size(); ++i) {
    BRAID_CHECK_ARG(tensors[i].defined(), "stack: tensor number {} in the list is undefined", i);
    BRAID_CHECK_ARG(tensors[i].shape() == tensors[0].shape(),
                    "stack expects each tensor to be equal size, but got {} at entry 0 and {} at entry {}",
                    shape_str(tensors[0].shape()), shape_str(tensors[i].shape()), i);
  }
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(d));
  return cat(parts, d);
}

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  BRAID_CHECK_ARG(a.dim() > 0, "split expects at least a 1-dimensional tensor");
  BRAID_CHECK_ARG(split_size >= 0, "split expects split_size be non-negative, but got split_size={}", split_size);
  const int64_t d = wrap_dim(dim, a.dim(), "split");
  const int64_t n = a.size(d);
  BRAID_CHECK_ARG(split_size != 0 || n == 0,
                  "split_size can only be 0 if dimension size is 0, but got dimension size of {}", n);
  if (n == 0) return {a.alias()};
  std::vector<Tensor> out;
  for (int64_t start = 0; start < n; start += split_size) {
    out.push_back(a.narrow(d, start, std::min(split_size, n - start)));
  }
  return out;
}

std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim) {
  BRAID_CHECK_ARG(a.dim() > 0, "split_with_sizes expects at least a 1-dimensional tensor");
  const int64_t d = wrap_dim(dim, a.dim(), "split_with_sizes");
  int64_t total = 0;
  for (int64_t s : sizes) {
    BRAID_CHECK_ARG(s >= 0,
                    "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes={}",
                    sizes_list(sizes));
    total += s;
  }
  BRAID_CHECK_ARG(total == a.size(d),
                  "split_with_sizes expects split_sizes to sum exactly to {} (input tensor's size at dimension {}), "
                  "but got split_sizes={}",
                  a.size(d), d, sizes_list(sizes));
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(a.narrow(d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  BRAID_CHECK_ARG(a.dim() > 0, "chunk expects at least a 1-dimensional tensor");
  BRAID_CHECK_ARG(chunks > 0, "chunk expects `chunks` to be greater than 0, got: {}", chunks);
  const int64_t d = wrap_dim(dim, a.dim(), "chunk");
  const int64_t n = a.size(d);
  const int64_t split_size = (n + chunks - 1) / chunks;
  // Empty dims split into `chunks` empty pieces; split() alone would return one.
  if (split_size == 0 && n == 0) return split(a, std::vector<int64_t>(static_cast<size_t>(chunks), 0), d);
  return split(a, split_size, d);
}

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  check_same_device("index_select", a, index);
  check_index_dtype("index_select", index);
  BRAID_CHECK_ARG(index.dim() <= 1, "index_select(): Index is supposed to be a vector, got {}", index.describe());
  const int64_t d = wrap_dim(dim, a.dim(), "index_select");
  const std::vector<int64_t> idx = index_values(index);
  if (a.dim() == 0) {
    BRAID_CHECK_ARG(idx.size() == 1, "index_select(): Index to scalar can have only 1 value, got {} value(s)",
                    idx.size());
    check_in_range("index_select", idx[0], 0, 1);
    return a.clone();
  }
  const int64_t size = a.size(d);
  for (int64_t i : idx) check_in_range("index_select", i, d, size);
  if (a.is_cuda()) {
    Shape shape = a.shape();
    shape[d] = static_cast<int64_t>(idx.size());
    Tensor out = Tensor::empty(shape, TensorOptions(a.dtype(), a.device()));
    if (out.numel() > 0) cuda::index_select(out, a, d, index);
    return out;
  }
  // Viewed as [outer, size, inner] contiguous, each pick is one block of inner elements.
  const Tensor src = a.contiguous();
  Shape out_shape = a.shape();
  out_shape[d] = static_cast<int64_t>(idx.size());
  Tensor out = Tensor::empty(out_shape, a.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < d; ++k) outer *= a.size(k);
  for (int64_t k = d + 1; k < a.dim(); ++k) inner *= a.size(k);
  const size_t block = static_cast<size_t>(inner) * a.element_size();
  const char* s = static_cast<const char*>(src.data_ptr());
  char* o = static_cast<char*>(out.data_ptr());
  if (block == 0) return out;
  for (int64_t i = 0; i < outer; ++i) {
    for (size_t j = 0; j < idx.size(); ++j) {
      std::memcpy(o + (i * static_cast<int64_t>(idx.size()) + static_cast<int64_t>(j)) * static_cast<int64_t>(block),
                  s + (i * size + idx[j]) * static_cast<int64_t>(block), block);
    }
  }
  return out;
}

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  check_same_device("gather", a, index);
  check_index_dtype("gather", index);
  const int64_t d = wrap_dim(dim, a.dim(), "gather");
  check_scatter_gather_shapes("gather", a, d, index, nullptr);
  Tensor out = Tensor::empty(index.shape(), TensorOptions(a.dtype(), a.device()));
  if (out.numel() == 0) return out;
  const int64_t size = a.dim() == 0 ? 1 : a.size(d);
  if (a.is_cuda()) {
    for (int64_t ix : index_values(index)) check_in_range("gather", ix, d, size);
    cuda::gather(out, a, d, index);
    return out;
  }
  const int64_t step = a.dim() == 0 ? 0 : a.stride(d) * static_cast<int64_t>(a.element_size());
  const size_t nd = index.shape().size();
  const auto rows = detail::make_rows<3>(
      index.shape(), {static_cast<char*>(out.data_ptr()), static_cast<char*>(index.data_ptr()),
                      static_cast<char*>(a.data_ptr())},
      {out.strides(), index.strides(), strides_without_dim(a, d, nd)},
      {out.element_size(), index.element_size(), a.element_size()});
  const DType idt = index.dtype();
  dispatch(a.dtype(), "gather", [&]<class T>() {
    detail::for_each_row(rows, [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t ix = read_index(p[1] + i * s[1], idt);
        check_in_range("gather", ix, d, size);
        *reinterpret_cast<T*>(p[0] + i * s[0]) = *reinterpret_cast<const T*>(p[2] + i * s[2] + ix * step);
      }
    });
  });
  return out;
}

const Tensor& scatter_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  check_same_device("scatter_add", self, index);
  check_same_device("scatter_add", self, src);
  check_index_dtype("scatter_add", index);
  BRAID_CHECK_ARG(self.dtype() == src.dtype(),
                  "scatter_add(): Expected self.dtype to be equal to src.dtype (self {}, src {})", self.describe(),
                  src.describe());
  const int64_t d = wrap_dim(dim, self.dim(), "scatter_add");
  BRAID_CHECK_ARG(src.dim() == index.dim() || index.numel() == 0,
                  "scatter_add(): Index tensor must have the same number of dimensions as src tensor ({} vs {})",
                  index.describe(), src.describe());
  check_scatter_gather_shapes("scatter_add", self, d, index, &src);
  if (index.numel() == 0) return self;
  const int64_t size = self.dim() == 0 ? 1 : self.size(d);
  // Validate every index before the first write, so an error leaves self untouched.
  for (int64_t ix : index_values(index)) check_in_range("scatter_add", ix, d, size);
  self.bump_version();
  if (self.is_cuda()) {
    cuda::scatter_add(self, d, index, src);
    return self;
  }
  const int64_t step = self.dim() == 0 ? 0 : self.stride(d) * static_cast<int64_t>(self.element_size());
  const size_t nd = index.shape().size();
  Shape src_strides(nd, 0);
  for (size_t k = 0; k < nd && k < static_cast<size_t>(src.dim()); ++k) src_strides[k] = src.strides()[k];
  const auto rows = detail::make_rows<3>(
      index.shape(), {static_cast<char*>(self.data_ptr()), static_cast<char*>(index.data_ptr()),
                      static_cast<char*>(src.data_ptr())},
      {strides_without_dim(self, d, nd), index.strides(), src_strides},
      {self.element_size(), index.element_size(), src.element_size()});
  const DType idt = index.dtype();
  dispatch(self.dtype(), "scatter_add", [&]<class T>() {
    detail::for_each_row(rows, [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t ix = read_index(p[1] + i * s[1], idt);
        T* dst = reinterpret_cast<T*>(p[0] + i * s[0] + ix * step);
        const T v = *reinterpret_cast<const T*>(p[2] + i * s[2]);
        if constexpr (std::is_same_v<T, bool>) {
          *dst = *dst || v;
        } else if constexpr (is_floating_v<T>) {
          *dst = T(static_cast<opmath_t<T>>(*dst) + static_cast<opmath_t<T>>(v));
        } else {
          // Wrap like the narrow type without signed-overflow UB.
          *dst = static_cast<T>(static_cast<uint64_t>(static_cast<int64_t>(*dst)) +
                                static_cast<uint64_t>(static_cast<int64_t>(v)));
        }
      }
    });
  });
  return self;
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = self.clone();
  scatter_add_(out, dim, index, src);
  return out;
}

}  // namespace braid
