// DistributedDataParallel::Join: training on uneven inputs (SPEC C.11). The collectives of one iteration,
// in the order every rank issues them (active ranks in forward/backward, joined ranks in the shadow):
//   1. allreduce SUM of "still training" (1 or 0): 0 means every rank has joined;
//   2. allreduce SUM of "wants grad sync" (joined ranks 0): 0 means the whole group is in no_sync;
//   3. when buffers are broadcast: allreduce MAX of the rank (joined: -1), then the buffer broadcast from it;
//   4. the bucket rebuild's broadcast, once, in the iteration where it happens;
//   5. one comm-hook call per bucket (joined ranks: zeros), then the used-map allreduce when unused
//      parameters are searched.
#include <exception>

#include <fmt/format.h>

#include "base/check.h"
#include "base/logging.h"
#include "parallel/ddp/control_device.h"
#include "parallel/ddp/ddp.h"
#include "tensor/factory.h"

namespace braid::parallel {

double DistributedDataParallel::allreduce_scalar(double value, collectives::ReduceOp op) {
  Tensor t = full({1}, value).to(control_device(*options_.process_group, params_.front()));
  collectives::TensorList list{t};
  collectives::AllreduceOptions o;
  o.reduce_op = op;
  options_.process_group->allreduce(list, o)->wait();
  return t.cpu().item<float>();
}

bool DistributedDataParallel::join_forward_prologue(bool active) {
  const double training = allreduce_scalar(active ? 1.0 : 0.0, collectives::ReduceOp::SUM);
  if (training == 0) return false;
  if (active) {
    ++join_iterations_;
    reducer_->set_divisor(join_divide_by_initial_ ? options_.process_group->size() : training);
  }
  const bool sync = allreduce_scalar(active && require_backward_grad_sync_ ? 1.0 : 0.0,
                                     collectives::ReduceOp::SUM) > 0;
  if (options_.broadcast_buffers && sync && !synced_buffers().empty()) {
    // From a rank still training: a joined rank's buffers stopped changing when it joined.
    const int common = static_cast<int>(
        allreduce_scalar(active ? options_.process_group->rank() : -1.0, collectives::ReduceOp::MAX));
    BRAID_CHECK_TYPED(InternalError, common >= 0,
                      "BUG! Expected rank_cond to be true for at least one process. This indicates a bug in braid.");
    sync_module_states(false, true, common);
  }
  return sync;
}

DistributedDataParallel::Join::Join(DistributedDataParallel& ddp, bool divide_by_initial_world_size, bool enable)
    : ddp_(ddp), enable_(enable), uncaught_(std::uncaught_exceptions()) {
  if (!enable_) return;
  BRAID_CHECK_ARG(!ddp_.join_enabled_, "DistributedDataParallel::join: a Join is already active on this DDP");
  ddp_.join_enabled_ = true;
  ddp_.join_divide_by_initial_ = divide_by_initial_world_size;
  ddp_.join_iterations_ = 0;
}

DistributedDataParallel::Join::~Join() {
  if (!enable_) return;
  if (std::uncaught_exceptions() > uncaught_) {
    ddp_.join_enabled_ = false;
    logging::get("braid.ddp")->error("rank {}: leaving DDP join because of an exception; the other ranks will time "
                                     "out in their next collective", ddp_.options_.process_group->rank());
    return;
  }
  try {
    ddp_.join_finish();
  } catch (const std::exception& e) {
    logging::get("braid.ddp")->error("rank {}: DDP join failed: {}", ddp_.options_.process_group->rank(), e.what());
  }
  ddp_.join_enabled_ = false;
  ddp_.reducer_->set_divisor(ddp_.options_.process_group->size());
}

void DistributedDataParallel::join_finish() {
  // Shadow the ranks still training, one iteration at a time, until all have joined.
  while (true) {
    const double training = allreduce_scalar(0.0, collectives::ReduceOp::SUM);
    if (training == 0) break;
    const bool sync = allreduce_scalar(0.0, collectives::ReduceOp::SUM) > 0;
    if (options_.broadcast_buffers && sync && !synced_buffers().empty()) {
      const int common = static_cast<int>(allreduce_scalar(-1.0, collectives::ReduceOp::MAX));
      sync_module_states(false, true, common);
    }
    if (sync) reducer_->join_shadow_iteration();
  }
  // The last ranks to finish hold the most trained model: the highest of them is the source for all.
  const double most = allreduce_scalar(static_cast<double>(join_iterations_), collectives::ReduceOp::MAX);
  const int root = static_cast<int>(allreduce_scalar(
      join_iterations_ == static_cast<int64_t>(most) ? options_.process_group->rank() : -1.0, collectives::ReduceOp::MAX));
  sync_module_states(/*params=*/true, /*buffers=*/options_.broadcast_buffers, root);
}

}  // namespace braid::parallel
