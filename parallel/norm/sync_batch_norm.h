// torch.nn.SyncBatchNorm over a braid process group: a batch norm whose training statistics are those of
// the whole group's batch (nn/batch_norm.h has the algorithm), and convert_sync_batchnorm, which turns
// every batch norm of a model into one in place (parameters, buffers and state-dict keys unchanged).
#pragma once

#include <memory>
#include <optional>

#include "collectives/core/process_group.h"
#include "nn/batch_norm.h"

namespace braid::parallel {

// BatchNormSync over a process group: all_gather of the statistics, allreduce of the gradient sums.
// Tensors travel on the group's device (control_device), whatever the batch norm's.
class GroupBatchNormSync : public nn::BatchNormSync {
 public:
  explicit GroupBatchNormSync(std::shared_ptr<collectives::ProcessGroup> group);
  Tensor all_gather(const Tensor& local) override;
  void all_reduce_sum(const Tensor& t) override;
  int size() const override { return group_->size(); }
  int rank() const override { return group_->rank(); }
  std::string describe() const override;

 private:
  std::shared_ptr<collectives::ProcessGroup> group_;
};

// A SyncBatchNorm (torch.nn.SyncBatchNorm's arguments): inputs of any rank >= 2, [N, C, *].
std::shared_ptr<nn::BatchNorm> make_sync_batch_norm(int64_t num_features, std::shared_ptr<collectives::ProcessGroup> group,
                                                    double eps = 1e-5, std::optional<double> momentum = 0.1,
                                                    bool affine = true, bool track_running_stats = true);

// Every batch norm of `module`'s tree (BatchNorm1d/2d/3d) synchronises over `group` from now on; returns
// how many were converted. As torch.nn.SyncBatchNorm.convert_sync_batchnorm, but in place: the module and
// whatever holds its batch norms keep working.
int convert_sync_batchnorm(nn::Module& module, std::shared_ptr<collectives::ProcessGroup> group);

}  // namespace braid::parallel
