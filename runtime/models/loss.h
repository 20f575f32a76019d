// The job file's `loss`, applied to a model's output and the batch's target. Every loss is differentiable
// in `output` (the target gets no gradient) and returns a scalar.
//
//   cross_entropy  output [N, C] logits, target [N] integer class indices; the mean over the batch
//   mse            output and target of the same shape (or output [N, 1] and target [N], read as [N, 1]);
//                  the mean of the squared differences
//   weighted_sum   sum(output * target) with PyTorch's broadcasting, exactly as the parameter-server example
//                  (torch's ddp_under_dist_autograd_test.py) writes its loss
//                  `(output * mini_batch.values).sum()`: output [B, 1] times values [N] broadcasts to
//                  [B, N], so the loss is sum(output) * sum(values), not a per-row weighting — kept literally
//
// A floating target of another dtype is converted to the output's. Shape and dtype errors are
// InvalidArgument naming the loss and both shapes ("mse: output [4, 2] and target [4, 3] ...").
//
// Plugins add losses of their own (runtime/plugin/plugin.h); a job names one with `loss: NAME`
// (LossKind::Registered, JobSpec::loss_name).
#pragma once

#include <functional>
#include <string>

#include "runtime/job/job_spec.h"
#include "tensor/tensor.h"

namespace braid::runtime {

// A built-in loss. InternalError for LossKind::Registered (compute_job_loss handles those).
Tensor compute_loss(LossKind kind, const Tensor& output, const Tensor& target);

struct LossDefinition {
  std::string name;
  std::string help;  // one line
  // A scalar, differentiable in `output` (autograd ops); the target gets no gradient.
  std::function<Tensor(const Tensor& output, const Tensor& target)> compute;
};

// Adds a loss; `origin` is the plugin's path ("" for braid's own). InvalidArgument for a taken name.
void register_loss(LossDefinition definition, std::string origin = {});
const LossDefinition* find_loss(const std::string& name);  // built-ins included; nullptr when unknown
std::string loss_origin(const std::string& name);          // "" for built-ins and unknown names
// InvalidArgument "loss: unknown loss 'x' (known: cross_entropy, mse, my_loss (plugin libmy.so), ...)".
void check_loss_known(const std::string& name);
// The job's loss: a built-in by its kind, a registered one by job.loss_name (its result must be a scalar).
Tensor compute_job_loss(const JobSpec& job, const Tensor& output, const Tensor& target);

// The fraction of rows whose largest logit is the target class: output [N, C], target [N] integer, N > 0.
double accuracy(const Tensor& output, const Tensor& target);

}  // namespace braid::runtime
