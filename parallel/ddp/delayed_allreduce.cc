#include "parallel/ddp/delayed_allreduce.h"

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/op_helpers.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "tensor/factory.h"

namespace braid::parallel {

std::shared_ptr<DelayedAllreduce> DelayedAllreduce::create(std::vector<Tensor> params, std::vector<std::string> names,
                                                           std::shared_ptr<collectives::ProcessGroup> group) {
  BRAID_CHECK_ARG(group != nullptr, "delay_all_reduce_named_params: a process group is needed");
  BRAID_CHECK_ARG(!params.empty(), "delay_all_reduce_named_params: no parameters");
  BRAID_CHECK_ARG(names.size() == params.size(), "delay_all_reduce_named_params: {} names for {} parameters",
                  names.size(), params.size());
  // One flat buffer holds every gradient, so they must agree on dtype and device (PyTorch makes one
  // buffer too, in the default dtype, which silently breaks other dtypes).
  for (size_t i = 0; i < params.size(); ++i) {
    BRAID_CHECK_ARG(params[i].defined() && autograd::requires_grad(params[i]),
                    "delay_all_reduce_named_params: {} must be a parameter that requires grad", names[i]);
    BRAID_CHECK_ARG(!params[i].is_sparse(), "delay_all_reduce_named_params: {} is sparse; only dense parameters "
                    "can be delayed", names[i]);
    BRAID_CHECK_ARG(params[i].dtype() == params[0].dtype() && params[i].device() == params[0].device(),
                    "delay_all_reduce_named_params: all delayed parameters must share one dtype and device, but {} "
                    "is {} on {} and {} is {} on {}", names[0], dtype_name(params[0].dtype()),
                    params[0].device().str(), names[i], dtype_name(params[i].dtype()), params[i].device().str());
  }
  return std::shared_ptr<DelayedAllreduce>(new DelayedAllreduce(std::move(params), std::move(names), std::move(group)));
}

DelayedAllreduce::DelayedAllreduce(std::vector<Tensor> params, std::vector<std::string> names,
                                   std::shared_ptr<collectives::ProcessGroup> group)
    : params_(std::move(params)), names_(std::move(names)), group_(std::move(group)) {
  int64_t total = 0;
  for (const auto& p : params_) total += p.numel();
  // On the CPU from the group's shared memory, like the Reducer's buckets.
  buffer_ = group_->empty_shared({total}, params_.front().dtype(), params_.front().device()).zero_();
  int64_t off = 0;
  for (const auto& p : params_) {
    views_.push_back(buffer_.slice(0, off, off + p.numel()).view(p.shape()));
    off += p.numel();
  }
}

bool DelayedAllreduce::is_view(size_t i, const Tensor& grad) const {
  return grad.shares_storage_with(buffer_) && grad.data_ptr() == views_[i].data_ptr() &&
         grad.shape() == views_[i].shape() && grad.strides() == views_[i].strides();
}

void DelayedAllreduce::prepare_grads() {
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = autograd::grad(params_[i]);
    if (g.defined() && is_view(i, g)) continue;
    // Undefined (zero_grad set it to none): start from zero. Replaced by the caller, or created by a
    // backward that ran without this preparation: keep the value, move it into the buffer.
    if (g.defined()) {
      views_[i].copy_(g);
    } else {
      views_[i].zero_();
    }
    autograd::set_grad(params_[i], views_[i]);
  }
}

std::vector<Tensor> DelayedAllreduce::attach_sink(const std::vector<Tensor>& outputs) {
  if (!autograd::GradMode::is_enabled()) return outputs;
  std::vector<size_t> at;
  std::vector<Tensor> tracked;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].defined() && autograd::requires_grad(outputs[i])) {
      at.push_back(i);
      tracked.push_back(outputs[i]);
    }
  }
  if (tracked.empty()) return outputs;
  // Weak: the graph of an output the caller keeps must not keep DDP's state alive.
  std::weak_ptr<DelayedAllreduce> weak = weak_from_this();
  const std::vector<Tensor> sunk = autograd::detail::record_multi(
      "DDPSinkBackward", tracked, tracked, {},
      [weak](const autograd::TensorList& grads, autograd::SavedTensors&) {
        if (auto self = weak.lock()) self->queue_reduction();
        return grads;  // identity
      });
  std::vector<Tensor> out = outputs;
  for (size_t k = 0; k < at.size(); ++k) out[at[k]] = sunk[k];
  return out;
}

void DelayedAllreduce::queue_reduction() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queued_) return;  // several outputs: one reduction per pass
    queued_ = true;
    accumulated_.assign(params_.size(), false);  // the sink runs before any parameter's accumulation
  }
  std::weak_ptr<DelayedAllreduce> weak = weak_from_this();
  autograd::queue_callback([weak] {
    if (auto self = weak.lock()) self->reduce();
  });
}

void DelayedAllreduce::reduce() {
  std::shared_ptr<collectives::Work> launched;
  std::string late;
  std::vector<size_t> detached;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_ = false;
    launched = std::move(launched_);
    late = std::move(late_);
    detached.swap(detached_);
    launched_.reset();
    late_.clear();
  }
  if (launched) {
    launched->wait();
    // Unused in this pass on this rank: the reduced view is its gradient (the other ranks' share).
    for (size_t i : detached) {
      if (!autograd::grad(params_[i]).defined()) autograd::set_grad(params_[i], views_[i]);
    }
    BRAID_CHECK_ARG(late.empty(),
                    "delay_all_reduce_named_params: the gradient of {} was accumulated after the allreduce that "
                    "param_to_hook_all_reduce ({}) started on rank {}, so the reduced gradients miss it: hook a "
                    "parameter whose gradient comes after every delayed parameter's (e.g. the first layer's)",
                    late, launch_param_, group_->rank());
    return;
  }
  // Inside a distributed autograd context the gradients live in the context, not in .grad, so they are
  // not in the buffer either.
  BRAID_CHECK_ARG(autograd::current_grad_sink() == nullptr,
                  "delay_all_reduce_named_params: not supported for a backward pass inside a distributed autograd "
                  "context (rank {}): its gradients do not go to .grad", group_->rank());
  launch()->wait();
}

std::shared_ptr<collectives::Work> DelayedAllreduce::launch() {
  // A .grad that the caller set to none between forward and backward was recreated by the backward
  // outside the buffer: bring it back, so that it is reduced too.
  prepare_grads();
  autograd::NoGradGuard no_grad;
  buffer_.mul_(1.0 / group_->size());
  collectives::TensorList list{buffer_};
  return group_->allreduce(list);
}

void DelayedAllreduce::launch_after(const Tensor& param, std::string name) {
  BRAID_CHECK_ARG(launch_param_.empty(), "param_to_hook_all_reduce: set twice ({} and {})", launch_param_, name);
  launch_param_ = std::move(name);
  std::weak_ptr<DelayedAllreduce> weak = weak_from_this();
  // The delayed parameters' hooks first: a parameter's hooks run in registration order, so a launch
  // parameter that is itself delayed counts as accumulated before it launches.
  for (size_t i = 0; i < params_.size(); ++i) {
    autograd::register_post_accumulate_grad_hook(params_[i], [weak, i](const Tensor&, const Tensor&) {
      if (auto self = weak.lock()) self->on_delayed_accumulated(i);
    });
  }
  autograd::register_post_accumulate_grad_hook(param, [weak](const Tensor&, const Tensor&) {
    if (auto self = weak.lock()) self->on_launch_param_accumulated();
  });
}

void DelayedAllreduce::on_launch_param_accumulated() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Only in a synced pass (the sink queued the reduction) and once per pass; inside a distributed
    // autograd context the end of the pass reports the error.
    if (!queued_ || launched_ != nullptr || autograd::current_grad_sink() != nullptr) return;
  }
  auto work = launch();
  std::vector<size_t> detach;
  {
    std::lock_guard<std::mutex> lock(mu_);
    launched_ = std::move(work);
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!accumulated_[i]) detach.push_back(i);
    }
    detached_ = detach;
  }
  // From here on the engine owns the buffer: a gradient still to come must not be added into it. (The
  // hooks run on the backward pass's thread, so none can arrive before this.) Outside mu_: a
  // parameter's own lock is taken while its hooks run, and they take mu_.
  for (size_t i : detach) autograd::set_grad(params_[i], Tensor());
}

void DelayedAllreduce::on_delayed_accumulated(size_t i) {
  std::lock_guard<std::mutex> lock(mu_);
  if (i < accumulated_.size()) accumulated_[i] = true;
  if (launched_ != nullptr && late_.empty()) late_ = names_[i];
}

}  // namespace braid::parallel
