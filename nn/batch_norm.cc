#include "nn/batch_norm.h"

#include <fmt/format.h>

#include <utility>

#include "autograd/grad_mode.h"
#include "autograd/ops/nn_ops.h"
#include "base/check.h"
#include "nn/init.h"
#include "nn/repr.h"
#include "tensor/factory.h"

namespace braid::nn {

BatchNorm::BatchNorm(std::string type_name, int64_t num_features, double eps, std::optional<double> momentum,
                     bool affine, bool track_running_stats)
    : Module(type_name),
      local_type_(std::move(type_name)),
      num_features_(num_features),
      eps_(eps),
      momentum_(momentum),
      affine_(affine),
      track_running_stats_(track_running_stats) {
  BRAID_CHECK_ARG(num_features > 0, "{}: num_features must be positive, got {}", local_type_, num_features);
  BRAID_CHECK_ARG(eps > 0, "{}: eps must be positive, got {}", local_type_, eps);
  if (affine_) {
    weight_ = register_parameter("weight", Tensor::empty({num_features}));
    bias_ = register_parameter("bias", Tensor::empty({num_features}));
  }
  if (track_running_stats_) {
    running_mean_ = register_buffer("running_mean", zeros({num_features}));
    running_var_ = register_buffer("running_var", ones({num_features}));
    num_batches_tracked_ = register_buffer("num_batches_tracked", zeros({}, DType::Int64));
  }
  reset_parameters();
}

void BatchNorm::reset_running_stats() {
  if (!track_running_stats_) return;
  running_mean_.zero_();
  running_var_.fill_(1.0);
  num_batches_tracked_.zero_();
}

void BatchNorm::reset_parameters() {
  reset_running_stats();
  if (!affine_) return;
  init::ones_(weight_);
  init::zeros_(bias_);
}

void BatchNorm::set_sync(std::shared_ptr<BatchNormSync> sync) {
  sync_ = std::move(sync);
  set_type_name(sync_ ? "SyncBatchNorm" : local_type_);
}

double BatchNorm::step_momentum() {
  num_batches_tracked_.add_(1);
  if (momentum_) return *momentum_;
  // torch: a cumulative moving average, 1 / (batches seen so far).
  return 1.0 / static_cast<double>(num_batches_tracked_.item().to_int());
}

Tensor BatchNorm::forward(const Tensor& input) {
  if (sync_) {
    BRAID_CHECK_ARG(input.dim() >= 2, "SyncBatchNorm: expected at least 2D input (got {}D input)", input.dim());
  } else {
    check_input_dim(input);
  }
  BRAID_CHECK_ARG(input.size(1) == num_features_,
                  "{}: input {} has {} channels (dim 1), the module normalises {}", type_name(), input.describe(),
                  input.size(1), num_features_);
  // Batch statistics when training, or when there are no running ones to use (torch's bn_training).
  const bool batch_stats = is_training() || !track_running_stats_;
  double momentum = 0.0;
  if (is_training() && track_running_stats_) momentum = step_momentum();
  const Tensor& rm = is_training() && !track_running_stats_ ? Tensor() : running_mean_;
  const Tensor& rv = is_training() && !track_running_stats_ ? Tensor() : running_var_;
  if (batch_stats && sync_ && is_training()) {
    BRAID_CHECK_ARG(sync_->size() > 1,
                    "SyncBatchNorm: forward in training on {}, a group of one rank: there is no other rank to share "
                    "statistics with; use a group of two or more ranks, or a local BatchNorm",
                    sync_->describe());
    return sync_batch_norm(input, rm, rv, weight_, bias_, momentum, eps_, *sync_);
  }
  return autograd::batch_norm(input, rm, rv, weight_, bias_, batch_stats, momentum, eps_);
}

std::string BatchNorm::extra_repr() const {
  return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}", num_features_, detail::py_float(eps_),
                     momentum_ ? detail::py_float(*momentum_) : std::string("None"), detail::py_bool(affine_),
                     detail::py_bool(track_running_stats_));
}

void BatchNorm1d::check_input_dim(const Tensor& input) const {
  BRAID_CHECK_ARG(input.dim() == 2 || input.dim() == 3, "BatchNorm1d: expected 2D or 3D input (got {}D input)",
                  input.dim());
}

void BatchNorm2d::check_input_dim(const Tensor& input) const {
  BRAID_CHECK_ARG(input.dim() == 4, "BatchNorm2d: expected 4D input (got {}D input)", input.dim());
}

void BatchNorm3d::check_input_dim(const Tensor& input) const {
  BRAID_CHECK_ARG(input.dim() == 5, "BatchNorm3d: expected 5D input (got {}D input)", input.dim());
}

}  // namespace braid::nn
