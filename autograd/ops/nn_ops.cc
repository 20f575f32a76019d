#include "autograd/ops/nn_ops.h"

#include "autograd/ops/elementwise.h"
#include "autograd/ops/op_helpers.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/shape.h"
#include "tensor/dispatch.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/shape_ops.h"

namespace braid::autograd {

using detail::record;

Tensor softmax(const Tensor& x, int64_t dim) {
  const int64_t d = wrap_dim(dim, x.dim(), "softmax");
  const Tensor shifted = braid::sub(x, braid::amax(x, {d}, true));
  const Tensor e = braid::exp(shifted);
  const Tensor y = braid::div(e, braid::sum(e, {d}, true));
  return record("SoftmaxBackward", {x}, y, {SavedTensor(y, "SoftmaxBackward")},
                [d](const TensorList& g, SavedTensors& s) {
                  const Tensor& yv = s[0].unpack();
                  // dx = y * (g - sum(g * y))
                  const Tensor dot = braid::sum(braid::mul(g[0], yv), {d}, true);
                  return TensorList{braid::mul(yv, braid::sub(g[0], dot))};
                });
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  const int64_t d = wrap_dim(dim, x.dim(), "log_softmax");
  const Tensor shifted = braid::sub(x, braid::amax(x, {d}, true));
  const Tensor lse = braid::log(braid::sum(braid::exp(shifted), {d}, true));
  const Tensor y = braid::sub(shifted, lse);
  return record("LogSoftmaxBackward", {x}, y, {SavedTensor(y, "LogSoftmaxBackward")},
                [d](const TensorList& g, SavedTensors& s) {
                  // dx = g - exp(y) * sum(g)
                  const Tensor total = braid::sum(g[0], {d}, true);
                  return TensorList{braid::sub(g[0], braid::mul(braid::exp(s[0].unpack()), total))};
                });
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction) {
  BRAID_CHECK_ARG(log_probs.dim() == 2, "nll_loss: expected input of shape [N, C], got {}", log_probs.describe());
  BRAID_CHECK_ARG(target.dim() == 1 && target.size(0) == log_probs.size(0) && !is_floating(target.dtype()),
                  "nll_loss: expected integer target of shape [{}], got {}", log_probs.size(0), target.describe());
  const int64_t n = log_probs.size(0), c = log_probs.size(1);
  const Tensor idx = target.to(DType::Int64).reshape({n, 1});
  const std::vector<int64_t> t = to_vector<int64_t>(idx);
  for (int64_t i = 0; i < n; ++i) {
    BRAID_CHECK_ARG(t[i] >= 0 && t[i] < c, "nll_loss: Target {} is out of bounds (number of classes {})", t[i], c);
  }
  Tensor picked = braid::neg(braid::gather(log_probs, 1, idx)).reshape({n});
  Tensor out = reduction == Reduction::None ? picked
               : reduction == Reduction::Sum ? braid::sum(picked)
                                              : braid::mean(picked);
  return record("NllLossBackward", {log_probs}, out, {SavedTensor(idx, "NllLossBackward")},
                [reduction, n, c](const TensorList& g, SavedTensors& s) {
                  Tensor per_row = reduction == Reduction::None ? g[0].reshape({n, 1})
                                   : reduction == Reduction::Sum ? g[0].reshape({1, 1}).expand({n, 1})
                                                                 : braid::div(g[0], static_cast<double>(n)).reshape({1, 1}).expand({n, 1});
                  Tensor grad = zeros({n, c}, TensorOptions(g[0].dtype(), g[0].device()));
                  braid::scatter_add_(grad, 1, s[0].unpack(), braid::neg(per_row).contiguous());
                  return TensorList{grad};
                });
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction) {
  return autograd::nll_loss(autograd::log_softmax(logits, 1), target, reduction);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  BRAID_CHECK_ARG(input.shape() == target.shape(), "mse_loss: input {} and target {} must have the same shape",
                  input.describe(), target.describe());
  const Tensor diff = autograd::sub(input, target);
  const Tensor sq = autograd::mul(diff, diff);
  if (reduction == Reduction::None) return sq;
  return reduction == Reduction::Sum ? autograd::sum(sq) : autograd::mean(sq);
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  BRAID_CHECK_ARG(k >= 1 && k <= x.dim(), "layer_norm: normalized_shape {} does not fit input {}",
                  shape_str(normalized_shape), x.describe());
  for (int64_t i = 0; i < k; ++i) {
    BRAID_CHECK_ARG(x.size(x.dim() - k + i) == normalized_shape[i],
                    "layer_norm: Given normalized_shape={}, expected input with shape [*, {}], but got input of size {}",
                    shape_str(normalized_shape), fmt::join(normalized_shape, ", "), shape_str(x.shape()));
  }
  Shape dims;
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) dims.push_back(i);
  // Composed from differentiable ops: the gradient follows from theirs and is gradchecked.
  const Tensor mu = autograd::mean(x, dims, true);
  const Tensor xc = autograd::sub(x, mu);
  const Tensor var = autograd::mean(autograd::mul(xc, xc), dims, true);
  const Tensor rstd = autograd::pow(autograd::add(var, eps), -0.5);
  Tensor y = autograd::mul(xc, rstd);
  if (weight.defined()) y = autograd::mul(y, weight);
  if (bias.defined()) y = autograd::add(y, bias);
  return y;
}

Shape batch_norm_dims(const Tensor& x) {
  Shape dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

Shape batch_norm_channel_shape(const Tensor& x) {
  Shape shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = x.size(1);
  return shape;
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  BRAID_CHECK_ARG(x.dim() >= 2, "batch_norm: expected an input of at least 2 dims [N, C, *], got {}", x.describe());
  const int64_t c = x.size(1);
  for (const Tensor* t : {&running_mean, &running_var, &weight, &bias}) {
    BRAID_CHECK_ARG(!t->defined() || t->numel() == c,
                    "batch_norm: per-channel tensor {} does not match the {} channels of input {}", t->describe(), c,
                    x.describe());
  }
  const Shape dims = batch_norm_dims(x);
  const Shape channel = batch_norm_channel_shape(x);
  Tensor y;
  if (training || !running_mean.defined()) {
    const int64_t n = c == 0 ? 0 : x.numel() / c;
    BRAID_CHECK_ARG(!training || n > 1, "batch_norm: Expected more than 1 value per channel when training, got input size {}",
                    shape_str(x.shape()));
    // Composed from differentiable ops, as layer_norm: the gradient follows from theirs.
    const Tensor mu = autograd::mean(x, dims, true);
    const Tensor xc = autograd::sub(x, mu);
    const Tensor var = autograd::mean(autograd::mul(xc, xc), dims, true);
    if (training && running_mean.defined()) {
      // Raw ops: the running statistics are buffers, outside the graph.
      const double unbias = n > 1 ? static_cast<double>(n) / static_cast<double>(n - 1) : 1.0;
      running_mean.mul_(1.0 - momentum).add_(braid::mul(mu.view({c}), momentum));
      running_var.mul_(1.0 - momentum).add_(braid::mul(var.view({c}), momentum * unbias));
    }
    y = autograd::mul(xc, autograd::pow(autograd::add(var, eps), -0.5));
  } else {
    const Tensor rstd = braid::pow(braid::add(running_var, eps), -0.5).view(channel);
    y = autograd::mul(autograd::sub(x, running_mean.view(channel)), rstd);
  }
  if (weight.defined()) y = autograd::mul(y, autograd::reshape(weight, channel));
  if (bias.defined()) y = autograd::add(y, autograd::reshape(bias, channel));
  return y;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  BRAID_CHECK_ARG(p >= 0.0 && p <= 1.0, "dropout probability has to be between 0 and 1, but got {}", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return autograd::mul(x, 0.0);
  const Tensor keep = braid::ge(rand(x.shape(), TensorOptions(x.dtype(), x.device()), gen), p);
  const Tensor mask = braid::div(keep.to(x.dtype()), 1.0 - p);
  return autograd::mul(x, mask);
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  BRAID_CHECK_ARG(weight.dim() == 2, "embedding: weight must be 2-D [num_embeddings, dim], got {}", weight.describe());
  BRAID_CHECK_ARG(!is_floating(indices.dtype()), "embedding: indices must be an integer tensor, got {}",
                  indices.describe());
  Shape out_shape = indices.shape();
  out_shape.push_back(weight.size(1));
  return autograd::reshape(autograd::index_select(weight, 0, indices.reshape({-1}).to(DType::Int64)), out_shape);
}

}  // namespace braid::autograd
