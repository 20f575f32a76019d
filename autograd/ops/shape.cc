#include "autograd/ops/shape.h"

#include "autograd/ops/op_helpers.h"
#include "tensor/factory.h"
#include "tensor/ops/shape_ops.h"

namespace braid::autograd {

using detail::record;

namespace {
using Rule = std::function<Tensor(const Tensor& grad)>;
Tensor unary_view(const char* name, const Tensor& a, const Tensor& out, Rule rule) {
  return record(name, {a}, out, {}, [rule = std::move(rule)](const TensorList& g, SavedTensors&) {
    return TensorList{rule(g[0])};
  });
}

// Scatters `g` (the gradient of a strided sub-view) into zeros of the input's shape.
Tensor embed(const Tensor& g, const Shape& in_shape, const std::function<Tensor(const Tensor&)>& view_of) {
  Tensor full = zeros(in_shape, TensorOptions(g.dtype(), g.device()));
  view_of(full).copy_(g);
  return full;
}
}  // namespace

Tensor view(const Tensor& a, const Shape& shape) {
  return unary_view("ViewBackward", a, a.view(shape), [s = a.shape()](const Tensor& g) { return g.reshape(s); });
}

Tensor reshape(const Tensor& a, const Shape& shape) {
  return unary_view("ReshapeBackward", a, a.reshape(shape), [s = a.shape()](const Tensor& g) { return g.reshape(s); });
}

Tensor transpose(const Tensor& a, int64_t dim0, int64_t dim1) {
  return unary_view("TransposeBackward", a, a.transpose(dim0, dim1),
                    [dim0, dim1](const Tensor& g) { return g.transpose(dim0, dim1); });
}

Tensor permute(const Tensor& a, const Shape& dims) {
  Shape inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[static_cast<size_t>(wrap_dim(dims[i], a.dim(), "permute"))] = static_cast<int64_t>(i);
  return unary_view("PermuteBackward", a, a.permute(dims), [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor expand(const Tensor& a, const Shape& shape) {
  return unary_view("ExpandBackward", a, a.expand(shape),
                    [s = a.shape()](const Tensor& g) { return detail::sum_to(g, s); });
}

Tensor unsqueeze(const Tensor& a, int64_t dim) {
  return unary_view("UnsqueezeBackward", a, a.unsqueeze(dim), [s = a.shape()](const Tensor& g) { return g.reshape(s); });
}

Tensor squeeze(const Tensor& a, int64_t dim) {
  return unary_view("SqueezeBackward", a, a.squeeze(dim), [s = a.shape()](const Tensor& g) { return g.reshape(s); });
}

Tensor flatten(const Tensor& a, int64_t start_dim, int64_t end_dim) {
  return unary_view("FlattenBackward", a, a.flatten(start_dim, end_dim),
                    [s = a.shape()](const Tensor& g) { return g.reshape(s); });
}

Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length) {
  return unary_view("NarrowBackward", a, a.narrow(dim, start, length), [s = a.shape(), dim, start, length](const Tensor& g) {
    return embed(g, s, [&](const Tensor& f) { return f.narrow(dim, start, length); });
  });
}

Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return unary_view("SliceBackward", a, a.slice(dim, start, end, step), [s = a.shape(), dim, start, end, step](const Tensor& g) {
    return embed(g, s, [&](const Tensor& f) { return f.slice(dim, start, end, step); });
  });
}

Tensor select(const Tensor& a, int64_t dim, int64_t index) {
  return unary_view("SelectBackward", a, a.select(dim, index), [s = a.shape(), dim, index](const Tensor& g) {
    return embed(g, s, [&](const Tensor& f) { return f.select(dim, index); });
  });
}

Tensor contiguous(const Tensor& a) {
  return unary_view("ContiguousBackward", a, a.contiguous(), [](const Tensor& g) { return g; });
}

Tensor to(const Tensor& a, DType dtype) {
  return unary_view("ToCopyBackward", a, a.to(dtype), [d = a.dtype()](const Tensor& g) { return g.to(d); });
}

Tensor to(const Tensor& a, Device device) {
  if (!a.defined() || a.device() == device) return a;
  return unary_view("ToCopyBackward", a, a.to(device),
                    [from = a.device()](const Tensor& g) { return g.defined() ? g.to(from) : g; });
}

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  return record("IndexSelectBackward", {a}, braid::index_select(a, dim, index), {SavedTensor(index, "IndexSelectBackward")},
                [s = a.shape(), dim](const TensorList& g, SavedTensors& saved) {
                  // Rows picked several times receive the sum of their gradients.
                  const Tensor& idx = saved[0].unpack();
                  const int64_t d = wrap_dim(dim, static_cast<int64_t>(s.size()), "index_select");
                  Shape index_shape(s.size(), 1);
                  index_shape[d] = idx.numel();
                  Shape expand_shape = g[0].shape();
                  Tensor full_index = idx.reshape(index_shape).expand(expand_shape).contiguous();
                  Tensor out = zeros(s, TensorOptions(g[0].dtype(), g[0].device()));
                  braid::scatter_add_(out, d, full_index, g[0].contiguous());
                  return TensorList{out};
                });
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  Tensor out = braid::cat(tensors, dim);
  std::vector<int64_t> sizes;
  std::vector<bool> skipped;
  const int64_t d = wrap_dim(dim, out.dim(), "cat");
  for (const Tensor& t : tensors) {
    // braid::cat skips 1-D empty tensors whatever the other shapes are; their gradient is empty too.
    skipped.push_back(t.dim() == 1 && t.numel() == 0);
    sizes.push_back(skipped.back() ? 0 : t.size(d));
  }
  return record("CatBackward", tensors, out, {}, [sizes, skipped, d](const TensorList& g, SavedTensors&) {
    TensorList out_grads;
    int64_t start = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      // A narrow of length 0 would have the output's rank, not the skipped input's shape [0].
      out_grads.push_back(skipped[i] ? zeros({0}, TensorOptions(g[0].dtype(), g[0].device()))
                                     : g[0].narrow(d, start, sizes[i]));
      start += sizes[i];
    }
    return out_grads;
  });
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  Tensor out = braid::stack(tensors, dim);
  const int64_t d = wrap_dim(dim, out.dim(), "stack");
  return record("StackBackward", tensors, out, {}, [d, n = tensors.size()](const TensorList& g, SavedTensors&) {
    TensorList out_grads;
    for (size_t i = 0; i < n; ++i) out_grads.push_back(g[0].select(d, static_cast<int64_t>(i)));
    return out_grads;
  });
}

namespace {
// Gradient of a split: the pieces' gradients concatenated (missing ones as zeros).
std::vector<Tensor> record_pieces(const char* name, const Tensor& a, const std::vector<Tensor>& pieces, int64_t dim) {
  const int64_t d = wrap_dim(dim, a.dim(), name);
  std::vector<Shape> shapes;
  for (const Tensor& p : pieces) shapes.push_back(p.shape());
  return detail::record_multi(name, {a}, pieces, {}, [shapes, d](const TensorList& g, SavedTensors&) {
    TensorList parts;
    DType dtype = DType::Float32;
    Device device = Device::cpu();
    for (const Tensor& t : g) {
      if (t.defined()) {
        dtype = t.dtype();
        device = t.device();
      }
    }
    for (size_t i = 0; i < shapes.size(); ++i) {
      parts.push_back(i < g.size() && g[i].defined() ? g[i] : zeros(shapes[i], TensorOptions(dtype, device)));
    }
    return TensorList{braid::cat(parts, d)};
  });
}
}  // namespace

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  return record_pieces("SplitBackward", a, braid::split(a, split_size, dim), dim);
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  return record_pieces("ChunkBackward", a, braid::chunk(a, chunks, dim), dim);
}

}  // namespace braid::autograd
