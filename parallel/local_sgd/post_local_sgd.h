// Post-local SGD (Lin et al., 2018), PyTorch 1.13's torch.distributed.algorithms: post_localSGD_hook with
// PostLocalSGDState, PeriodicModelAverager, and PostLocalSGDOptimizer.
//
// The hook averages gradients over the whole group for the first `start_localsgd_iter` iterations (an
// iteration ends with the bucket whose is_last() is true), then only within `subgroup` (torch's default:
// the ranks of each host, new_subgroups(); a subgroup of one rank means plain local SGD, no communication).
// From then on the replicas drift apart between averagings; PostLocalSGDOptimizer wraps the optimizer and,
// after each step, lets a PeriodicModelAverager average the parameters over the whole group every
// `period` steps once `warmup_steps` have passed. Start the averager's warm-up where the hook's local phase
// starts (torch's advice), so that the two switch together.
#pragma once

#include <memory>

#include "collectives/core/process_group.h"
#include "nn/optim/optimizer.h"
#include "parallel/ddp/comm_hook.h"

namespace braid::parallel {

class PostLocalSGDState {
 public:
  // group: the global group (the hook's group before the switch); subgroup: the group averaged over
  // afterwards (nullptr: each rank alone, no communication). start_localsgd_iter >= 1.
  PostLocalSGDState(std::shared_ptr<collectives::ProcessGroup> group,
                    std::shared_ptr<collectives::ProcessGroup> subgroup, int64_t start_localsgd_iter,
                    bool post_local_gradient_allreduce = true);

  int64_t iteration() const { return iter_; }
  int64_t start_localsgd_iter() const { return start_; }

 private:
  friend NamedCommHook post_localsgd_hook(std::shared_ptr<PostLocalSGDState> state);

  std::shared_ptr<collectives::ProcessGroup> group_;
  std::shared_ptr<collectives::ProcessGroup> subgroup_;
  int64_t start_;
  bool post_local_gradient_allreduce_;
  int64_t iter_ = 0;  // touched only by the hook, on the backward thread
};

NamedCommHook post_localsgd_hook(std::shared_ptr<PostLocalSGDState> state);

// torch.distributed.algorithms.model_averaging.averagers.PeriodicModelAverager.
class PeriodicModelAverager {
 public:
  // period >= 1; period 1 averages after every step past the warm-up (and warns, as torch does, that this
  // equals plain DDP's cost).
  PeriodicModelAverager(std::shared_ptr<collectives::ProcessGroup> group, int64_t period, int64_t warmup_steps = 0);
  // Counts a step; past the warm-up, every `period` steps, replaces each parameter by its group average
  // (one allreduce per dtype).
  void average_parameters(const nn::TensorList& params);
  int64_t step() const { return step_; }

 private:
  std::shared_ptr<collectives::ProcessGroup> group_;
  int64_t period_;
  int64_t warmup_steps_;
  int64_t step_ = 0;
};

// torch.distributed.optim.PostLocalSGDOptimizer: optim.step(), then the averager over optim's parameters.
class PostLocalSGDOptimizer {
 public:
  PostLocalSGDOptimizer(std::unique_ptr<nn::optim::Optimizer> optim, std::shared_ptr<PeriodicModelAverager> averager);
  void step();
  void zero_grad(bool set_to_none = true) { optim_->zero_grad(set_to_none); }
  nn::optim::Optimizer& optimizer() { return *optim_; }
  PeriodicModelAverager& averager() { return *averager_; }

 private:
  std::unique_ptr<nn::optim::Optimizer> optim_;
  std::shared_ptr<PeriodicModelAverager> averager_;
};

}  // namespace braid::parallel
