// Tensor views: new geometry over the same storage. None of these copies data except reshape() when the
// requested shape cannot be expressed as a view.
#include <algorithm>
#include <numeric>
#include <optional>

#include "tensor/tensor.h"

namespace braid {
namespace {

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

// Resolves a single -1 in `shape` against `numel`; checks the product.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  std::optional<size_t> infer;
  int64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      BRAID_CHECK_ARG(!infer.has_value(), "{}: only one dimension can be inferred in shape {}", op,
                      shape_str(shape));
      infer = i;
    } else {
      BRAID_CHECK_ARG(out[i] >= 0, "{}: invalid shape dimension {} in {}", op, out[i], shape_str(shape));
      known *= out[i];
    }
  }
  if (infer) {
    BRAID_CHECK_ARG(known != 0 && numel % known == 0, "{}: shape '{}' is invalid for input of size {}", op,
                    shape_str(shape), numel);
    out[*infer] = numel / known;
  }
  BRAID_CHECK_ARG(shape_numel(out) == numel, "{}: shape '{}' is invalid for input of size {}", op,
                  shape_str(shape), numel);
  return out;
}

// Strides for viewing (old_sizes, old_strides) as new_sizes without copying, if possible
// (groups of old dims that are contiguous among themselves can be split and merged freely).
std::optional<Shape> view_strides(const Shape& old_sizes, const Shape& old_strides, const Shape& new_sizes) {
  Shape new_strides(new_sizes.size());
  if (old_sizes.empty()) {
    std::fill(new_strides.begin(), new_strides.end(), 1);
    return new_strides;
  }
  const int64_t numel = shape_numel(old_sizes);
  if (numel == 0) return contiguous_strides(new_sizes);
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_sizes[d];
    // A chunk ends where the next-outer old dim is not contiguous with this one.
    if (d == 0 || (old_sizes[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

}  // namespace

Tensor Tensor::view(const Shape& shape) const {
  const Shape sizes = infer_shape(shape, numel(), "view");
  auto strides = view_strides(this->shape(), this->strides(), sizes);
  BRAID_CHECK_ARG(strides.has_value(),
                  "view: view size is not compatible with input tensor's size and stride (at least one "
                  "dimension spans across two contiguous subspaces); tensor {} with strides {} to shape {}. "
                  "Use .reshape(...) instead.",
                  describe(), shape_str(this->strides()), shape_str(sizes));
  return make_view(*this, sizes, *strides, storage_offset());
}

Tensor Tensor::reshape(const Shape& shape) const {
  const Shape sizes = infer_shape(shape, numel(), "reshape");
  if (auto strides = view_strides(this->shape(), this->strides(), sizes)) {
    return make_view(*this, sizes, *strides, storage_offset());
  }
  return clone().view(sizes);
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  BRAID_CHECK_ARG(this->dim() > 0, "narrow() cannot be applied to a 0-dim tensor.");
  const int64_t d = wrap_dim(dim, this->dim(), "narrow");
  const int64_t n = size(d);
  if (start < 0) start += n;
  BRAID_CHECK_ARG(start >= 0 && start <= n, "narrow: start ({}) out of range for dimension {} of size {}", start,
                  d, n);
  BRAID_CHECK_ARG(length >= 0, "narrow: length must be non-negative, got {}", length);
  BRAID_CHECK_ARG(start + length <= n, "narrow: start ({}) + length ({}) exceeds dimension size ({}).", start,
                  length, n);
  Shape sizes = shape();
  sizes[d] = length;
  return make_view(*this, sizes, strides(), storage_offset() + start * stride(d));
}

Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  BRAID_CHECK_ARG(this->dim() > 0, "slice() cannot be applied to a 0-dim tensor.");
  BRAID_CHECK_ARG(step > 0, "slice: step must be positive, got {}", step);
  const int64_t d = wrap_dim(dim, this->dim(), "slice");
  const int64_t n = size(d);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sizes = shape();
  Shape st = strides();
  sizes[d] = (end - start + step - 1) / step;
  const int64_t offset = storage_offset() + start * st[d];
  st[d] *= step;
  return make_view(*this, sizes, st, offset);
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  BRAID_CHECK_ARG(this->dim() > 0, "select() cannot be applied to a 0-dim tensor.");
  const int64_t d = wrap_dim(dim, this->dim(), "select");
  const int64_t n = size(d);
  BRAID_CHECK_ARG(index >= -n && index < n, "select(): index {} out of range for tensor of size {} at dimension {}",
                  index, shape_str(shape()), d);
  if (index < 0) index += n;
  Shape sizes = shape();
  Shape st = strides();
  const int64_t offset = storage_offset() + index * st[d];
  sizes.erase(sizes.begin() + d);
  st.erase(st.begin() + d);
  return make_view(*this, sizes, st, offset);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  const int64_t a = wrap_dim(dim0, dim(), "transpose");
  const int64_t b = wrap_dim(dim1, dim(), "transpose");
  if (dim() == 0) return alias();
  Shape sizes = shape();
  Shape st = strides();
  std::swap(sizes[a], sizes[b]);
  std::swap(st[a], st[b]);
  return make_view(*this, sizes, st, storage_offset());
}

Tensor Tensor::t() const {
  BRAID_CHECK_ARG(dim() <= 2, "t() expects a tensor with <= 2 dimensions, but self is {}D", dim());
  return dim() < 2 ? alias() : transpose(0, 1);
}

Tensor Tensor::permute(const Shape& dims) const {
  BRAID_CHECK_ARG(static_cast<int64_t>(dims.size()) == dim(),
                  "permute: number of dimensions in the tensor input does not match the length of "
                  "the desired ordering of dimensions i.e. input.dim() = {} is not equal to len(dims) = {}",
                  dim(), dims.size());
  Shape sizes(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim(), "permute");
    BRAID_CHECK_ARG(!seen[d], "permute: repeated dim {} in {}", d, shape_str(dims));
    seen[d] = true;
    sizes[i] = shape()[d];
    st[i] = strides()[d];
  }
  return make_view(*this, sizes, st, storage_offset());
}

Tensor Tensor::expand(const Shape& target) const {
  const int64_t nd = static_cast<int64_t>(target.size());
  BRAID_CHECK_ARG(nd >= dim(),
                  "expand: the number of sizes provided ({}) must be greater or equal to the number of "
                  "dimensions in the tensor ({})",
                  nd, dim());
  Shape sizes(target.size()), st(target.size());
  for (int64_t i = nd - 1; i >= 0; --i) {
    const int64_t src = i - (nd - dim());
    if (src < 0) {
      BRAID_CHECK_ARG(target[i] >= 0, "expand: the expanded size {} is not allowed in a leading, non-existing "
                                      "dimension {}", target[i], i);
      sizes[i] = target[i];
      st[i] = 0;
      continue;
    }
    const int64_t have = shape()[src];
    const int64_t want = target[i] == -1 ? have : target[i];
    if (have == want) {
      sizes[i] = have;
      st[i] = strides()[src];
    } else {
      BRAID_CHECK_ARG(have == 1,
                      "expand: The expanded size of the tensor ({}) must match the existing size ({}) at "
                      "non-singleton dimension {}.  Target sizes: {}.  Tensor sizes: {}",
                      want, have, i, shape_str(target), shape_str(shape()));
      sizes[i] = want;
      st[i] = 0;
    }
  }
  return make_view(*this, sizes, st, storage_offset());
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int64_t s = wrap_dim(start_dim, dim(), "flatten");
  const int64_t e = wrap_dim(end_dim, dim(), "flatten");
  BRAID_CHECK_ARG(s <= e, "flatten() has invalid args: start_dim ({}) cannot come after end_dim ({})", s, e);
  Shape sizes(shape().begin(), shape().begin() + s);
  int64_t merged = 1;
  for (int64_t i = s; i <= e; ++i) merged *= shape()[i];
  sizes.push_back(merged);
  sizes.insert(sizes.end(), shape().begin() + e + 1, shape().end());
  return reshape(sizes);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  const int64_t at = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape sizes = shape();
  Shape st = strides();
  const int64_t new_stride = at < dim() ? st[at] * sizes[at] : 1;
  sizes.insert(sizes.begin() + at, 1);
  st.insert(st.begin() + at, new_stride);
  return make_view(*this, sizes, st, storage_offset());
}

Tensor Tensor::squeeze() const {
  Shape sizes, st;
  for (int64_t i = 0; i < dim(); ++i) {
    if (shape()[i] != 1) {
      sizes.push_back(shape()[i]);
      st.push_back(strides()[i]);
    }
  }
  return make_view(*this, sizes, st, storage_offset());
}

Tensor Tensor::squeeze(int64_t d) const {
  if (dim() == 0) return alias();
  const int64_t at = wrap_dim(d, dim(), "squeeze");
  if (shape()[at] != 1) return alias();
  Shape sizes = shape();
  Shape st = strides();
  sizes.erase(sizes.begin() + at);
  st.erase(st.begin() + at);
  return make_view(*this, sizes, st, storage_offset());
}

Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, int64_t offset) const {
  return from_storage(storage(), shape, strides, offset, dtype());
}

}  // namespace braid
