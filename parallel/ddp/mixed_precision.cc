#include "parallel/ddp/mixed_precision.h"

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "tensor/factory.h"

namespace braid::parallel {

std::shared_ptr<ParamPrecision> ParamPrecision::create(const std::vector<Tensor>& params, DType dtype) {
  BRAID_CHECK_ARG(is_floating(dtype), "DistributedDataParallel: param_dtype must be floating, got {}", dtype_name(dtype));
  std::vector<Tensor> cast;
  for (const auto& p : params) {
    if (is_floating(p.dtype()) && p.dtype() != dtype && !p.is_sparse()) cast.push_back(p);
  }
  std::shared_ptr<ParamPrecision> self(new ParamPrecision(std::move(cast), dtype));
  self->install_hooks();
  return self;
}

void ParamPrecision::install_hooks() {
  std::weak_ptr<ParamPrecision> weak = weak_from_this();
  for (const auto& p : params_) {
    autograd::register_post_accumulate_grad_hook(p, [weak](const Tensor&, const Tensor&) {
      auto self = weak.lock();
      if (!self) return;
      {
        std::lock_guard<std::mutex> lock(self->mu_);
        if (!self->low_now_ || self->restore_queued_) return;
        self->restore_queued_ = true;
      }
      // Runs after every node of this backward and before the Reducer's finalize (queued later).
      autograd::queue_callback([weak] {
        if (auto s = weak.lock()) s->restore();
      });
    });
  }
}

void ParamPrecision::to_low_precision() {
  std::lock_guard<std::mutex> lock(mu_);
  restore_locked();
  if (params_.empty()) return;
  autograd::NoGradGuard no_grad;
  if (low_.empty()) {
    for (const auto& p : params_) low_.push_back(empty(p.shape(), TensorOptions(dtype_, p.device())));
  }
  full_.clear();
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    // The parameter may have been given new data since the last forward (load_state_dict, set_data).
    if (low_[i].shape() != p.shape() || !(low_[i].device() == p.device())) {
      low_[i] = empty(p.shape(), TensorOptions(dtype_, p.device()));
    }
    full_.push_back(p.alias());
    low_[i].copy_(p);
    p.set_data(low_[i]);
  }
  low_now_ = true;
  restore_queued_ = false;
}

void ParamPrecision::restore() {
  std::lock_guard<std::mutex> lock(mu_);
  restore_locked();
}

void ParamPrecision::restore_locked() {
  if (!low_now_) return;
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    p.set_data(full_[i]);
    const Tensor g = autograd::grad(p);
    // In place: the Reducer holds this very tensor and writes the reduced gradient into it next.
    if (g.defined() && !g.is_sparse() && g.dtype() != p.dtype()) g.set_data(g.to(p.dtype()));
  }
  full_.clear();
  low_now_ = false;
  restore_queued_ = false;
}

bool ParamPrecision::low_precision() const {
  std::lock_guard<std::mutex> lock(mu_);
  return low_now_;
}

}  // namespace braid::parallel
