#include "autograd/ops/linalg.h"

#include "autograd/ops/op_helpers.h"
#include "autograd/ops/shape.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/linalg.h"
#include "tensor/ops/reduce.h"

namespace braid::autograd {

Tensor mm(const Tensor& a, const Tensor& b) {
  const auto needs = detail::needs_grad({a, b});
  return detail::record("MmBackward", {a, b}, braid::mm(a, b),
                        {SavedTensor(needs[1] ? a : Tensor(), "MmBackward"),
                         SavedTensor(needs[0] ? b : Tensor(), "MmBackward")},
                        [needs](const TensorList& g, SavedTensors& s) {
                          // d(ab)/da = g b^T, d(ab)/db = a^T g; transposes are views (no copies).
                          return TensorList{needs[0] ? braid::mm(g[0], s[1].unpack().t()) : Tensor(),
                                            needs[1] ? braid::mm(s[0].unpack().t(), g[0]) : Tensor()};
                        });
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  const auto needs = detail::needs_grad({a, b});
  return detail::record("BmmBackward", {a, b}, braid::bmm(a, b),
                        {SavedTensor(needs[1] ? a : Tensor(), "BmmBackward"),
                         SavedTensor(needs[0] ? b : Tensor(), "BmmBackward")},
                        [needs](const TensorList& g, SavedTensors& s) {
                          return TensorList{needs[0] ? braid::bmm(g[0], s[1].unpack().transpose(1, 2)) : Tensor(),
                                            needs[1] ? braid::bmm(s[0].unpack().transpose(1, 2), g[0]) : Tensor()};
                        });
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  // Expressed through differentiable views and mm/bmm, so the gradient follows from theirs.
  BRAID_CHECK_ARG(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dimension, got {} and {}",
                  a.describe(), b.describe());
  if (a.dim() == 1 && b.dim() == 1) return autograd::reshape(autograd::mm(autograd::reshape(a, {1, -1}), autograd::reshape(b, {-1, 1})), {});
  if (a.dim() == 2 && b.dim() == 1) return autograd::reshape(autograd::mm(a, autograd::reshape(b, {-1, 1})), {-1});
  if (a.dim() == 1 && b.dim() == 2) return autograd::reshape(autograd::mm(autograd::reshape(a, {1, -1}), b), {-1});
  if (a.dim() == 2 && b.dim() == 2) return autograd::mm(a, b);
  if (b.dim() == 2) {
    // [*, n, k] x [k, m]: fold the batch into rows, one GEMM.
    Shape out_shape(a.shape().begin(), a.shape().end() - 1);
    out_shape.push_back(b.size(1));
    return autograd::reshape(autograd::mm(autograd::reshape(a, {-1, a.size(-1)}), b), out_shape);
  }
  // Batched: broadcast batch dims, then bmm.
  const Tensor a3 = a.dim() == 1 ? autograd::unsqueeze(a, 0) : a;
  const Tensor b3 = b.dim() == 1 ? autograd::unsqueeze(b, 1) : b;
  Shape batch_a(a3.shape().begin(), a3.shape().end() - 2), batch_b(b3.shape().begin(), b3.shape().end() - 2);
  Shape batch = batch_a.size() >= batch_b.size() ? batch_a : batch_b;
  {
    // Broadcast the two batch shapes.
    const size_t nd = std::max(batch_a.size(), batch_b.size());
    batch.assign(nd, 1);
    for (size_t i = 0; i < nd; ++i) {
      const int64_t x = i + batch_a.size() >= nd ? batch_a[i + batch_a.size() - nd] : 1;
      const int64_t y = i + batch_b.size() >= nd ? batch_b[i + batch_b.size() - nd] : 1;
      BRAID_CHECK_ARG(x == y || x == 1 || y == 1, "matmul: batch dimensions of {} and {} do not broadcast",
                      a.describe(), b.describe());
      batch[i] = std::max(x, y);
    }
  }
  int64_t nb = 1;
  for (int64_t s : batch) nb *= s;
  Shape ea = batch, eb = batch;
  ea.push_back(a3.size(-2));
  ea.push_back(a3.size(-1));
  eb.push_back(b3.size(-2));
  eb.push_back(b3.size(-1));
  Tensor r = autograd::bmm(autograd::reshape(autograd::expand(a3, ea), {nb, a3.size(-2), a3.size(-1)}),
                 autograd::reshape(autograd::expand(b3, eb), {nb, b3.size(-2), b3.size(-1)}));
  Shape out_shape = batch;
  if (a.dim() > 1) out_shape.push_back(a3.size(-2));
  if (b.dim() > 1) out_shape.push_back(b3.size(-1));
  return autograd::reshape(r, out_shape);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  BRAID_CHECK_ARG(weight.dim() == 2, "linear: weight must be 2-D [out, in], got {}", weight.describe());
  BRAID_CHECK_ARG(x.dim() >= 1 && x.size(-1) == weight.size(1),
                  "linear: mat1 and mat2 shapes cannot be multiplied (input {} vs weight {})", x.describe(),
                  weight.describe());
  const auto needs = detail::needs_grad({x, weight, bias});
  // One fused node: y = x W^T + b over x flattened to 2-D; the bias is added by broadcasting.
  const Tensor x2 = x.reshape({-1, x.size(-1)});
  Tensor y = braid::mm(x2, weight.t());
  if (bias.defined()) y.add_(bias);
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(weight.size(0));
  y = y.view(out_shape);
  return detail::record(
      "LinearBackward", {x, weight, bias}, y,
      {SavedTensor(needs[1] ? x2 : Tensor(), "LinearBackward"), SavedTensor(needs[0] ? weight : Tensor(), "LinearBackward")},
      [needs, x_shape = x.shape()](const TensorList& g, SavedTensors& s) {
        const Tensor g2 = g[0].reshape({-1, g[0].size(-1)});
        Tensor gx, gw, gb;
        if (needs[0]) gx = braid::mm(g2, s[1].unpack()).view(x_shape);
        // The weight is not needed any more: whatever only it kept alive (FSDP's gathered parameters) can
        // go back before the weight's gradient, as large as the weight, is allocated.
        s.release(1);
        if (needs[1]) gw = braid::mm(g2.t(), s[0].unpack());
        if (needs[2]) gb = braid::sum(g2, {0});
        return TensorList{gx, gw, gb};
      });
}

}  // namespace braid::autograd
