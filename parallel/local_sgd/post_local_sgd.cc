#include "parallel/local_sgd/post_local_sgd.h"

#include <fmt/format.h>

#include <map>

#include "autograd/grad_mode.h"
#include "base/check.h"
#include "base/logging.h"
#include "parallel/control_device.h"
#include "parallel/flat_params.h"
#include "parallel/ddp/default_hooks.h"
#include "tensor/factory.h"

namespace braid::parallel {

PostLocalSGDState::PostLocalSGDState(std::shared_ptr<collectives::ProcessGroup> group,
                                     std::shared_ptr<collectives::ProcessGroup> subgroup, int64_t start_localsgd_iter,
                                     bool post_local_gradient_allreduce)
    : group_(detail::checked_group(std::move(group), "post_localsgd_hook")),
      subgroup_(std::move(subgroup)),
      start_(start_localsgd_iter),
      post_local_gradient_allreduce_(post_local_gradient_allreduce) {
  BRAID_CHECK_ARG(start_ >= 1, "post_localsgd_hook: start_localSGD_iter must be at least 1, got {}", start_);
}

NamedCommHook post_localsgd_hook(std::shared_ptr<PostLocalSGDState> state) {
  BRAID_CHECK_ARG(state != nullptr, "post_localsgd_hook: the state is null");
  return NamedCommHook{"post_localSGD_hook", [state](GradBucket& bucket) -> Future<Tensor> {
                         PostLocalSGDState& s = *state;
                         if (s.iter_ < s.start_) {
                           // torch's maybe_increase_iter: an iteration ends with its last bucket.
                           if (bucket.is_last() && ++s.iter_ == s.start_) {
                             logging::get("braid.ddp")->info("post-local SGD: local SGD starts after {} iterations",
                                                             s.iter_);
                           }
                           return detail::allreduce_average(*s.group_, bucket.buffer());
                         }
                         // Local phase: the subgroup's average, or the local gradients as they are.
                         if (!s.post_local_gradient_allreduce_ || s.subgroup_ == nullptr || s.subgroup_->size() == 1) {
                           Future<Tensor> done(fmt::format("post_localSGD_hook of bucket {}", bucket.index()));
                           done.set_value(bucket.buffer());
                           return done;
                         }
                         return detail::allreduce_average(*s.subgroup_, bucket.buffer());
                       }};
}

PeriodicModelAverager::PeriodicModelAverager(std::shared_ptr<collectives::ProcessGroup> group, int64_t period,
                                             int64_t warmup_steps)
    : group_(detail::checked_group(std::move(group), "PeriodicModelAverager")),
      period_(period),
      warmup_steps_(warmup_steps) {
  BRAID_CHECK_ARG(period_ >= 1, "PeriodicModelAverager: Arg ``period`` must be a positive value, got {}", period_);
  BRAID_CHECK_ARG(warmup_steps_ >= 0, "PeriodicModelAverager: Arg ``warmup_steps`` must be a non-negative number, got {}",
                  warmup_steps_);
  if (period_ == 1) {
    logging::get("braid.ddp")->warn(
        "PeriodicModelAverager: when period is 1, no need to use model averaging because the communication cost of "
        "all-reducing parameters will be no less than the cost of all-reducing gradients by DistributedDataParallel "
        "in the backward pass. Therefore, only DistributedDataParallel should be used for this case.");
  }
}

void PeriodicModelAverager::average_parameters(const nn::TensorList& params) {
  // torch: average when step >= warmup_steps and (step - warmup_steps) % period == 0, then count the step.
  const bool now = step_ >= warmup_steps_ && (step_ - warmup_steps_) % period_ == 0;
  ++step_;
  if (!now || params.empty()) return;
  autograd::NoGradGuard no_grad;
  std::map<std::pair<DType, std::string>, std::vector<size_t>> by_kind;
  for (size_t i = 0; i < params.size(); ++i) {
    by_kind[{params[i].dtype(), fmt::format("{}", params[i].device())}].push_back(i);
  }
  const double inv = 1.0 / static_cast<double>(group_->size());
  for (const auto& [kind, indices] : by_kind) {
    Tensor flat = pack_params(params, indices, control_device(*group_, params[indices[0]]));
    flat.mul_(inv);
    collectives::TensorList ts{flat};
    group_->allreduce(ts)->wait();
    unpack_params(flat, params, indices);
  }
}

PostLocalSGDOptimizer::PostLocalSGDOptimizer(std::unique_ptr<nn::optim::Optimizer> optim,
                                             std::shared_ptr<PeriodicModelAverager> averager)
    : optim_(std::move(optim)), averager_(std::move(averager)) {
  BRAID_CHECK_ARG(optim_ != nullptr && averager_ != nullptr, "PostLocalSGDOptimizer: needs an optimizer and an averager");
}

void PostLocalSGDOptimizer::step() {
  optim_->step();
  averager_->average_parameters(optim_->params());
}

}  // namespace braid::parallel
