// braid::Tensor: an n-dimensional strided view of a shared Storage, with a dtype and a device.
//
// A Tensor is a cheap handle (a shared pointer to its TensorImpl): copying a Tensor aliases it, and views
// (view, narrow, transpose, ...) share the storage. Shapes follow PyTorch: a 0-dim tensor is a scalar.
// Dimension arguments accept negative values counted from the end.
//
// In-place operations bump the storage's version counter (shared by every view of the storage).
// Tensor is not autograd-aware; the autograd layer attaches its metadata through autograd_meta().
//
// Thread-safety: concurrent reads of one tensor are safe; writes need external synchronisation.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "base/check.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/scalar.h"
#include "tensor/storage.h"

namespace braid {

using Shape = std::vector<int64_t>;

// Options for tensor factories: dtype and device. Converts implicitly from either.
struct TensorOptions {
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  TensorOptions() = default;
  TensorOptions(DType d) : dtype(d) {}     // NOLINT(google-explicit-constructor)
  TensorOptions(Device dev) : device(dev) {}  // NOLINT
  TensorOptions(DType d, Device dev) : dtype(d), device(dev) {}
};

class SparseTensor;

// The autograd layer's per-tensor state; opaque to the tensor library.
struct AutogradMetaBase {
  virtual ~AutogradMetaBase() = default;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;  // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  std::shared_ptr<AutogradMetaBase> autograd_meta;
  // Set for a sparse COO tensor seen through a Tensor handle (sparse gradients travel through autograd and
  // the collectives this way): sizes is the dense shape, storage is the values' storage, and data_ptr()
  // refuses, so a strided kernel can never misread it. See tensor/sparse.h.
  std::shared_ptr<const SparseTensor> sparse;
};

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Uninitialised memory of the given shape, contiguous.
  static Tensor empty(const Shape& shape, TensorOptions options = {});
  // A tensor over existing storage with explicit geometry. Throws if the view would reach outside it.
  static Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& shape, const Shape& strides,
                             int64_t offset, DType dtype);

  // --- Metadata
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().sizes; }
  const Shape& sizes() const { return impl().sizes; }
  const Shape& strides() const { return impl().strides; }
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return static_cast<int64_t>(impl().sizes.size()); }
  int64_t numel() const;
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  bool is_cuda() const { return device().is_cuda(); }
  int64_t storage_offset() const { return impl().offset; }
  size_t element_size() const { return braid::element_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  // A sparse COO tensor (see tensor/sparse.h: as_sparse() / SparseTensor::to_tensor()).
  bool is_sparse() const { return impl().sparse != nullptr; }
  const SparseTensor& sparse() const;
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  bool shares_storage_with(const Tensor& other) const { return storage() == other.storage(); }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  // How many handles share this tensor (0 when undefined): lets autograd take over a gradient that nothing
  // else references instead of copying it.
  long use_count() const noexcept { return impl_.use_count(); }
  TensorImpl* unsafe_impl() const { return impl_.get(); }
  // "float32[2, 3] cpu" — for error messages and logs.
  std::string describe() const;

  // Pointer to the first element (storage data + offset).
  void* data_ptr() const;
  // Typed pointer; throws if T is not this tensor's element type.
  template <class T> T* data() const;
  // The single value of a one-element tensor, converted to T. Throws for numel() != 1.
  template <class T> T item() const;
  Scalar item() const;

  // --- Versions and autograd slot
  uint64_t version() const { return storage()->version(); }
  void bump_version() const { storage()->bump_version(); }
  AutogradMetaBase* autograd_meta() const { return impl().autograd_meta.get(); }
  void set_autograd_meta(std::shared_ptr<AutogradMetaBase> meta) const { impl_->autograd_meta = std::move(meta); }
  // A new handle on the same storage and geometry, without autograd metadata.
  Tensor alias() const;
  // Makes this handle (and every copy of it) refer to `src`'s storage, geometry and dtype, keeping this
  // tensor's autograd metadata: how modules change a parameter's dtype or device in place, and how FSDP
  // swaps a parameter between its shard and the gathered full tensor.
  void set_data(const Tensor& src) const;

  // --- Views (share storage; see tensor/views.cc)
  Tensor view(const Shape& shape) const;      // one size may be -1; needs compatible strides
  Tensor reshape(const Shape& shape) const;   // a view when possible, else a copy
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;  // clamps like Python
  Tensor select(int64_t dim, int64_t index) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // transpose of a tensor of at most 2 dims
  Tensor permute(const Shape& dims) const;
  Tensor expand(const Shape& shape) const;  // -1 keeps a size; new leading dims allowed
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset) const;

  // --- Copies and conversion (tensor/copy.cc)
  Tensor contiguous() const;  // this tensor when already contiguous
  Tensor clone() const;       // always a fresh contiguous copy
  Tensor to(DType dtype) const;    // this tensor when the dtype already matches
  Tensor to(Device device) const;  // this tensor when already there
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }
  // Copies src into this tensor: src broadcasts to this shape; any dtypes, layouts and devices.
  const Tensor& copy_(const Tensor& src) const;
  const Tensor& fill_(Scalar value) const;
  const Tensor& zero_() const { return fill_(0); }

  // --- Arithmetic (tensor/ops/elementwise.cc); see ops/elementwise.h for the free-function forms.
  Tensor add(const Tensor& other, Scalar alpha = 1) const;
  Tensor sub(const Tensor& other, Scalar alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;
  const Tensor& add_(const Tensor& other, Scalar alpha = 1) const;
  const Tensor& sub_(const Tensor& other, Scalar alpha = 1) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& div_(const Tensor& other) const;
  const Tensor& add_(Scalar other) const;
  const Tensor& mul_(Scalar other) const;

 private:
  const TensorImpl& impl() const {
    BRAID_CHECK_ARG(impl_ != nullptr, "operation on an undefined tensor");
    return *impl_;
  }

  std::shared_ptr<TensorImpl> impl_;
};

// Contiguous (row-major) strides for a shape.
Shape contiguous_strides(const Shape& shape);
// Product of sizes (1 for a 0-dim shape).
int64_t shape_numel(const Shape& shape);
// Wraps a possibly negative dim into [0, ndim); throws naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// "[2, 3]"
std::string shape_str(const Shape& shape);

template <class T>
T* Tensor::data() const {
  BRAID_CHECK_ARG(dtype_of<T>() == dtype(), "data<{}>(): tensor has dtype {}", dtype_name(dtype_of<T>()),
                  dtype());
  return static_cast<T*>(data_ptr());
}

template <class T>
T Tensor::item() const {
  return item().to<T>();
}

}  // namespace braid
