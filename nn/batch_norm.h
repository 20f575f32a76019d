// nn::BatchNorm1d/2d/3d, as torch.nn's: per-channel normalisation of [N, C, *] inputs over the batch and
// every trailing dim, with running statistics (momentum, or a cumulative average when momentum is
// unset), eval mode, and torch's state-dict keys (weight, bias, running_mean, running_var,
// num_batches_tracked).
//
// A batch norm becomes a SyncBatchNorm by being given a BatchNormSync (parallel/sync_batch_norm.h does
// that for a process group, and convert_sync_batchnorm for every batch norm of a model): its training
// forward then takes the statistics of the whole group's batch, torch's algorithm, and its backward
// reduces the two gradient sums over the group. The module keeps its parameters, buffers and keys.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "nn/module.h"

namespace braid::nn {

// What a synchronised batch norm needs of a group. Every rank calls each method in the same order.
class BatchNormSync {
 public:
  virtual ~BatchNormSync() = default;
  // Every rank's `local` (one shape on every rank), stacked in rank order: [size(), *local.shape].
  virtual Tensor all_gather(const Tensor& local) = 0;
  // Sums `t` over the group, in place.
  virtual void all_reduce_sum(const Tensor& t) = 0;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  // "group 'world' (rank 1 of 3)", for messages.
  virtual std::string describe() const = 0;
};

class BatchNorm : public Module {
 public:
  // `input_dims`: the ranks an input may have (BatchNorm1d: 2 or 3; 2d: 4; 3d: 5), named in the error.
  // momentum unset: the running statistics are the cumulative average of every batch's.
  BatchNorm(std::string type_name, int64_t num_features, double eps, std::optional<double> momentum, bool affine,
            bool track_running_stats);

  Tensor forward(const Tensor& input) override;
  void reset_running_stats();
  void reset_parameters();

  // Synchronises the training statistics over `sync`'s group; the module then prints as SyncBatchNorm.
  // nullptr makes it local again.
  void set_sync(std::shared_ptr<BatchNormSync> sync);
  const std::shared_ptr<BatchNormSync>& sync() const { return sync_; }

  int64_t num_features() const { return num_features_; }
  double eps() const { return eps_; }
  std::optional<double> momentum() const { return momentum_; }
  bool affine() const { return affine_; }
  bool track_running_stats() const { return track_running_stats_; }
  // Undefined without affine / track_running_stats.
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }
  const Tensor& num_batches_tracked() const { return num_batches_tracked_; }

 protected:
  std::string extra_repr() const override;
  virtual void check_input_dim(const Tensor& input) const = 0;

 private:
  // The factor the running statistics move by this step (after counting the batch).
  double step_momentum();

  std::string local_type_;
  int64_t num_features_;
  double eps_;
  std::optional<double> momentum_;
  bool affine_;
  bool track_running_stats_;
  Tensor weight_;
  Tensor bias_;
  Tensor running_mean_;
  Tensor running_var_;
  Tensor num_batches_tracked_;
  std::shared_ptr<BatchNormSync> sync_;
};

// [N, C] or [N, C, L].
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm("BatchNorm1d", num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input_dim(const Tensor& input) const override;
};

// [N, C, H, W].
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm("BatchNorm2d", num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input_dim(const Tensor& input) const override;
};

// [N, C, D, H, W].
class BatchNorm3d : public BatchNorm {
 public:
  explicit BatchNorm3d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm("BatchNorm3d", num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input_dim(const Tensor& input) const override;
};

// The training forward of a synchronised batch norm (torch's SyncBatchNorm algorithm): each rank's
// per-channel mean, biased variance and count are gathered, combined into the group's, and the running
// statistics updated with the group's unbiased variance; the backward sums sum(dy) and sum(dy * (x - mean))
// over the group. weight/bias may be undefined.
Tensor sync_batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                       const Tensor& bias, double momentum, double eps, BatchNormSync& sync);

}  // namespace braid::nn
