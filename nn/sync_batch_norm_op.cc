// The training forward and backward of a synchronised batch norm (declared in nn/batch_norm.h), following
// torch's SyncBatchNorm: gather every rank's (mean, biased variance, count) per channel, combine them
// into the group's statistics, normalise with those; in backward, sum the two per-channel gradient sums
// over the group so that each rank's input gradient is that of the whole batch.
#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/op_helpers.h"
#include "base/check.h"
#include "nn/batch_norm.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/shape_ops.h"

namespace braid::nn {
namespace {

struct GroupStats {
  Tensor mean;    // [C]
  Tensor invstd;  // [C]: 1 / sqrt(var + eps)
  Tensor var;     // [C], biased
  double count = 0;  // values per channel over the whole group
};

// Chan et al.'s pairwise combination, all at once: mean = sum(n_r m_r) / N and
// var = sum(n_r (v_r + (m_r - mean)^2)) / N, as torch's batch_norm_gather_stats_with_counts.
GroupStats combine(const Tensor& gathered, int64_t c, double eps) {
  const Tensor means = gathered.narrow(1, 0, c);
  const Tensor vars = gathered.narrow(1, c, c);
  const Tensor counts = gathered.narrow(1, 2 * c, 1);  // [W, 1]
  GroupStats s;
  s.count = braid::sum(counts).to(DType::Float64).item().to_double();
  s.mean = braid::div(braid::sum(braid::mul(means, counts), {0}), s.count);
  const Tensor dev = braid::sub(means, s.mean);
  s.var = braid::div(braid::sum(braid::mul(braid::add(vars, braid::mul(dev, dev)), counts), {0}), s.count);
  s.invstd = braid::pow(braid::add(s.var, eps), -0.5);
  return s;
}

}  // namespace

Tensor sync_batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                       const Tensor& bias, double momentum, double eps, BatchNormSync& sync) {
  BRAID_CHECK_ARG(x.dim() >= 2, "SyncBatchNorm: expected at least 2D input (got {}D input)", x.dim());
  const int64_t c = x.size(1);
  const Shape dims = autograd::batch_norm_dims(x);
  const Shape channel = autograd::batch_norm_channel_shape(x);
  const double local_count = c == 0 ? 0.0 : static_cast<double>(x.numel() / c);

  GroupStats g;
  {
    autograd::NoGradGuard no_grad;
    const Tensor mean = braid::mean(x, dims);
    const Tensor xc = braid::sub(x, mean.view(channel));
    const Tensor var = braid::mean(braid::mul(xc, xc), dims);
    const Tensor packed = cat({mean, var, full({1}, local_count, TensorOptions(x.dtype(), x.device()))}, 0);
    g = combine(sync.all_gather(packed), c, eps);
  }
  BRAID_CHECK_ARG(g.count > 1,
                  "SyncBatchNorm: Expected more than 1 value per channel when training, got {} over {} (input {} "
                  "on this rank)",
                  g.count, sync.describe(), shape_str(x.shape()));
  if (running_mean.defined()) {
    const double unbias = g.count / (g.count - 1);
    running_mean.mul_(1.0 - momentum).add_(braid::mul(g.mean, momentum));
    running_var.mul_(1.0 - momentum).add_(braid::mul(g.var, momentum * unbias));
  }
  const Tensor mean_c = g.mean.view(channel);
  const Tensor invstd_c = g.invstd.view(channel);
  Tensor y = braid::mul(braid::sub(x, mean_c), invstd_c);
  if (weight.defined()) y = braid::mul(y, weight.view(channel));
  if (bias.defined()) y = braid::add(y, bias.view(channel));

  const double total = g.count;
  // Whether to reduce in backward is decided here, the same way on every rank (their graphs match).
  const bool x_needs_grad = autograd::detail::needs_grad({x})[0];
  BatchNormSync* group = &sync;  // the module that owns it outlives its backward passes
  std::vector<autograd::SavedTensor> saved{{x, "SyncBatchNormBackward"}, {mean_c, "SyncBatchNormBackward"},
                                           {invstd_c, "SyncBatchNormBackward"}};
  if (weight.defined()) saved.emplace_back(weight, "SyncBatchNormBackward");
  return autograd::detail::record(
      "SyncBatchNormBackward", {x, weight, bias}, y, std::move(saved),
      [dims, channel, c, total, group, x_needs_grad](const autograd::TensorList& grads, autograd::SavedTensors& s) {
        const Tensor& dy = grads[0];
        const Tensor& xs = s[0].unpack();
        const Tensor& mean = s[1].unpack();
        const Tensor& invstd = s[2].unpack();
        const Tensor w = s.size() > 3 ? s[3].unpack() : Tensor();
        const Tensor xmu = braid::sub(xs, mean);
        const Tensor sum_dy = braid::sum(dy, dims);
        const Tensor sum_dy_xmu = braid::sum(braid::mul(dy, xmu), dims);
        autograd::TensorList out(3);
        // The parameters' gradients are this rank's (DDP averages them), as torch's.
        if (w.defined()) out[1] = braid::mul(sum_dy_xmu, invstd.view({c}));
        out[2] = sum_dy;
        if (x_needs_grad) {
          const Tensor both = cat({sum_dy, sum_dy_xmu}, 0);
          group->all_reduce_sum(both);
          const Tensor mean_dy = braid::div(both.narrow(0, 0, c), total).view(channel);
          const Tensor mean_dy_xmu = braid::div(both.narrow(0, c, c), total).view(channel);
          Tensor gx = braid::sub(braid::sub(dy, mean_dy), braid::mul(braid::mul(xmu, braid::mul(invstd, invstd)), mean_dy_xmu));
          gx = braid::mul(gx, invstd);
          if (w.defined()) gx = braid::mul(gx, w.view(channel));
          out[0] = gx;
        }
        return out;
      });
}

}  // namespace braid::nn
