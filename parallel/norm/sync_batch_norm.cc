#include "parallel/norm/sync_batch_norm.h"

#include <fmt/format.h>

#include "base/check.h"
#include "parallel/control_device.h"
#include "tensor/factory.h"

namespace braid::parallel {
namespace {

// The dims-agnostic batch norm that SyncBatchNorm is: any input of rank >= 2.
class AnyRankBatchNorm : public nn::BatchNorm {
 public:
  using nn::BatchNorm::BatchNorm;

 protected:
  void check_input_dim(const Tensor& input) const override {
    BRAID_CHECK_ARG(input.dim() >= 2, "SyncBatchNorm: expected at least 2D input (got {}D input)", input.dim());
  }
};

}  // namespace

GroupBatchNormSync::GroupBatchNormSync(std::shared_ptr<collectives::ProcessGroup> group) : group_(std::move(group)) {
  BRAID_CHECK_ARG(group_ != nullptr, "SyncBatchNorm: the process group is null");
}

std::string GroupBatchNormSync::describe() const {
  return fmt::format("group '{}' (rank {} of {}, {})", group_->name(), group_->rank(), group_->size(),
                     group_->backend_name());
}

Tensor GroupBatchNormSync::all_gather(const Tensor& local) {
  const Device where = control_device(*group_, local);
  Tensor in = local.contiguous().to(where);
  Shape out_shape = local.shape();
  out_shape.insert(out_shape.begin(), group_->size());
  Tensor out = Tensor::empty(out_shape, TensorOptions(local.dtype(), where));
  group_->allgather_into_tensor(out, in)->wait();
  return out.to(local.device());
}

void GroupBatchNormSync::all_reduce_sum(const Tensor& t) {
  const Device where = control_device(*group_, t);
  collectives::TensorList ts{t.device() == where && t.is_contiguous() ? t : t.contiguous().to(where)};
  group_->allreduce(ts)->wait();
  if (!ts[0].is_same(t)) t.copy_(ts[0]);
}

std::shared_ptr<nn::BatchNorm> make_sync_batch_norm(int64_t num_features, std::shared_ptr<collectives::ProcessGroup> group,
                                                    double eps, std::optional<double> momentum, bool affine,
                                                    bool track_running_stats) {
  auto bn = std::make_shared<AnyRankBatchNorm>("SyncBatchNorm", num_features, eps, momentum, affine, track_running_stats);
  bn->set_sync(std::make_shared<GroupBatchNormSync>(std::move(group)));
  return bn;
}

int convert_sync_batchnorm(nn::Module& module, std::shared_ptr<collectives::ProcessGroup> group) {
  BRAID_CHECK_ARG(group != nullptr, "convert_sync_batchnorm: the process group is null");
  auto sync = std::make_shared<GroupBatchNormSync>(std::move(group));
  int converted = 0;
  for (auto& [name, m] : module.named_modules()) {
    if (auto* bn = dynamic_cast<nn::BatchNorm*>(m)) {
      bn->set_sync(sync);
      ++converted;
    }
  }
  return converted;
}

}  // namespace braid::parallel
