#include "tensor/tensor.h"

#include <algorithm>

#include <fmt/format.h>

#include <new>

#include "base/oom_error.h"
#include "tensor/cuda/device_api.h"

namespace braid {

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t range = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts dim 0 and -1
  BRAID_CHECK_ARG(dim >= -range && dim < range,
                  "{}: dimension out of range (expected to be in range of [{}, {}], but got {})", op, -range,
                  range - 1, dim);
  return dim < 0 ? dim + range : dim;
}

std::string shape_str(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

Tensor Tensor::empty(const Shape& shape, TensorOptions options) {
  // The strides, the element count and the byte count are products of the sizes (a size 0 counted as 1
  // for the strides), and each must fit in int64: a decoder hands over shapes straight from its input
  // ([0, 2^40, 2^40] is empty, yet its strides overflow), and an overflowed byte count would allocate
  // too little.
  // A shape without a 0 whose bytes overflow (such as [4000000000, 4000000000]) asks for more memory than
  // exists: an OutOfMemoryError; one with a 0 holds nothing, but its strides still must fit.
  const bool has_zero = std::find(shape.begin(), shape.end(), 0) != shape.end();
  int64_t extent = static_cast<int64_t>(braid::element_size(options.dtype));
  for (int64_t s : shape) {
    BRAID_CHECK_ARG(s >= 0, "empty: negative dimension {} in shape {}", s, shape_str(shape));
    if (!__builtin_mul_overflow(extent, std::max<int64_t>(s, 1), &extent)) continue;
    if (!has_zero) {
      BRAID_THROW(OutOfMemoryError, "empty: a {} tensor of shape {} has more bytes than an int64 holds",
                  options.dtype, shape_str(shape));
    }
    BRAID_THROW(InvalidArgument, "empty: shape {} of {} is too large: its sizes (a 0 counted as 1) times the element "
                "size exceed 2^63 - 1", shape_str(shape), dtype_name(options.dtype));
  }
  if (options.device.is_cuda()) cuda::check_device(options.device, "empty");
  // No overflow now: the byte count is at most `extent` (a 0 makes it 0).
  const int64_t nbytes = has_zero ? 0 : extent;
  auto impl = std::make_shared<TensorImpl>();
  try {
    impl->storage = Storage::allocate(static_cast<size_t>(nbytes), options.device);
  } catch (const OutOfMemoryError& e) {
    BRAID_THROW(OutOfMemoryError, "empty: out of memory for a {} tensor of shape {} on {} ({} bytes, {:.3g} GiB): {}",
                options.dtype, shape_str(shape), options.device, nbytes, static_cast<double>(nbytes) / (1u << 30),
                e.what());
  } catch (const std::bad_alloc&) {
    BRAID_THROW(OutOfMemoryError, "empty: out of memory for a {} tensor of shape {} on {} ({} bytes, {:.3g} GiB)",
                options.dtype, shape_str(shape), options.device, nbytes, static_cast<double>(nbytes) / (1u << 30));
  }
  impl->sizes = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = options.dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, const Shape& shape, const Shape& strides,
                            int64_t offset, DType dtype) {
  BRAID_CHECK_ARG(storage != nullptr, "from_storage: null storage");
  BRAID_CHECK_EQ(shape.size(), strides.size(), "from_storage: shape {} and strides {} differ in length",
                 shape_str(shape), shape_str(strides));
  BRAID_CHECK_ARG(offset >= 0, "from_storage: negative storage offset {}", offset);
  int64_t max_index = offset;
  bool empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    BRAID_CHECK_ARG(shape[i] >= 0, "from_storage: negative size in shape {}", shape_str(shape));
    BRAID_CHECK_ARG(strides[i] >= 0, "from_storage: negative stride in strides {}", shape_str(strides));
    if (shape[i] == 0) empty = true;
    else max_index += (shape[i] - 1) * strides[i];
  }
  const int64_t needed = empty ? 0 : (max_index + 1) * static_cast<int64_t>(braid::element_size(dtype));
  BRAID_CHECK_ARG(needed <= static_cast<int64_t>(storage->nbytes()),
                  "from_storage: view {} (strides {}, offset {}, {}) needs {} bytes but the storage has {}",
                  shape_str(shape), shape_str(strides), offset, dtype, needed, storage->nbytes());
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->sizes = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

int64_t Tensor::size(int64_t dim) const { return shape()[static_cast<size_t>(wrap_dim(dim, this->dim(), "size"))]; }

int64_t Tensor::stride(int64_t dim) const {
  return strides()[static_cast<size_t>(wrap_dim(dim, this->dim(), "stride"))];
}

int64_t Tensor::numel() const { return shape_numel(shape()); }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  const auto& sz = shape();
  const auto& st = strides();
  for (size_t i = sz.size(); i-- > 0;) {
    if (sz[i] == 1) continue;
    if (sz[i] == 0) return true;
    if (st[i] != expected) return false;
    expected *= sz[i];
  }
  return true;
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined tensor";
  return fmt::format("{}{} {}{}", dtype(), shape_str(shape()), device(), is_sparse() ? " sparse_coo" : "");
}

const SparseTensor& Tensor::sparse() const {
  BRAID_CHECK_ARG(is_sparse(), "sparse(): tensor {} is not a sparse COO tensor", describe());
  return *impl().sparse;
}

void* Tensor::data_ptr() const {
  BRAID_CHECK_ARG(!is_sparse(), "{}: this operation needs strided data but got a sparse COO tensor; convert it with "
                  "to_dense() first", describe());
  return static_cast<char*>(storage()->data()) + storage_offset() * static_cast<int64_t>(element_size());
}

Tensor Tensor::alias() const {
  auto impl = std::make_shared<TensorImpl>(this->impl());
  impl->autograd_meta.reset();
  return Tensor(std::move(impl));
}

void Tensor::set_data(const Tensor& src) const {
  BRAID_CHECK_ARG(defined() && src.defined(), "set_data: both tensors must be defined");
  impl_->storage = src.storage();
  impl_->sizes = src.shape();
  impl_->strides = src.strides();
  impl_->offset = src.storage_offset();
  impl_->dtype = src.dtype();
  impl_->sparse = src.impl().sparse;  // a sparse result (sparse allreduce) replaces a sparse tensor whole
}

}  // namespace braid
