#include "autograd/ops/reduce.h"

#include <algorithm>

#include "autograd/ops/op_helpers.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"

namespace braid::autograd {
namespace {

// The reduced dims, wrapped and sorted (all dims when `dims` is empty).
Shape reduced_dims(const Tensor& a, const Shape& dims) {
  Shape out;
  if (dims.empty()) {
    for (int64_t d = 0; d < a.dim(); ++d) out.push_back(d);
  } else {
    for (int64_t d : dims) out.push_back(wrap_dim(d, a.dim(), "sum"));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Expands a gradient of a reduction back to the input shape.
Tensor expand_back(const Tensor& g, const Shape& in_shape, const Shape& dims, bool keepdim) {
  Tensor r = g;
  if (!keepdim) {
    for (int64_t d : dims) r = r.unsqueeze(d);
  }
  return r.expand(in_shape);
}

}  // namespace

Tensor sum(const Tensor& a, const Shape& dims, bool keepdim) {
  const Shape rd = reduced_dims(a, dims);
  return detail::record("SumBackward", {a}, braid::sum(a, dims, keepdim), {},
                        [shape = a.shape(), rd, keepdim](const TensorList& g, SavedTensors&) {
                          return TensorList{expand_back(g[0], shape, rd, keepdim).contiguous()};
                        });
}

Tensor mean(const Tensor& a, const Shape& dims, bool keepdim) {
  const Shape rd = reduced_dims(a, dims);
  int64_t count = 1;
  for (int64_t d : rd) count *= a.shape()[d];
  return detail::record("MeanBackward", {a}, braid::mean(a, dims, keepdim), {},
                        [shape = a.shape(), rd, keepdim, count](const TensorList& g, SavedTensors&) {
                          return TensorList{braid::div(expand_back(g[0], shape, rd, keepdim), static_cast<double>(count))};
                        });
}

Tensor norm(const Tensor& a) {
  Tensor out = braid::norm(a);
  return detail::record("NormBackward", {a}, out, {SavedTensor(a, "NormBackward"), SavedTensor(out, "NormBackward")},
                        [](const TensorList& g, SavedTensors& s) {
                          const Tensor& x = s[0].unpack();
                          const Tensor& n = s[1].unpack();
                          // d|x|/dx = x / |x|, taken as 0 where |x| = 0 (as PyTorch's subgradient).
                          if (n.item<double>() == 0.0) return TensorList{zeros_like(x)};
                          return TensorList{braid::mul(braid::div(x, n), g[0])};
                        });
}

}  // namespace braid::autograd
