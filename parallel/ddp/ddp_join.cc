// DistributedDataParallel::Join: training on uneven inputs (PyTorch's ddp.join()). The collectives of one
// iteration, in the order every rank issues them (active ranks in forward/backward, joined ranks in the shadow):
//   1. allreduce SUM of "still training" (1 or 0): 0 means every rank has joined;
//   2. allreduce SUM of "wants grad sync" (joined ranks 0): 0 means the whole group is in no_sync;
//   3. when buffers are broadcast: allreduce MAX of the rank (joined: -1), then the buffer broadcast from it;
//      with a buffer comm hook before the forward, the hook's collectives instead (joined ranks call it
//      with their own buffers, as PyTorch's join hook does);
//   4. the bucket rebuild's broadcast, once, in the iteration where it happens;
//   4b. with a buffer comm hook after the forward: the hook's collectives;
//   5. one comm-hook call per bucket (joined ranks: zeros), then the used-map allreduce when unused
//      parameters are searched.
// With throw_on_early_termination the count of step 1 is the whole protocol: a count below the world size
// tells every rank at the same collective that some rank has run out of inputs, and all of them raise
// there (PyTorch needs a second allreduce for it; braid's count already carries the information).
#include <exception>

#include <fmt/format.h>

#include "base/check.h"
#include "base/logging.h"
#include "parallel/control_device.h"
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
  const int ws = options_.process_group->size();
  if (join_throw_ && training < ws) {
    BRAID_THROW(Error,
                "Detected at least one rank that exhausted inputs. Throwing across all ranks. (DDP join with "
                "throw_on_early_termination: rank {} found {} of {} ranks still training at its forward {})",
                options_.process_group->rank(), training, ws, join_iterations_ + 1);
  }
  if (active) {
    ++join_iterations_;
    reducer_->set_divisor(join_divide_by_initial_ ? options_.process_group->size() : training);
  }
  return join_sync_step(active);
}

bool DistributedDataParallel::join_sync_step(bool active) {
  const bool sync = allreduce_scalar(active && require_backward_grad_sync_ ? 1.0 : 0.0,
                                     collectives::ReduceOp::SUM) > 0;
  join_buffer_sync_ = options_.broadcast_buffers && sync && !synced_buffers().empty();
  if (join_buffer_sync_ && !buffer_hook_) {
    // From a rank still training: a joined rank's buffers stopped changing when it joined.
    const int common = static_cast<int>(
        allreduce_scalar(active ? options_.process_group->rank() : -1.0, collectives::ReduceOp::MAX));
    BRAID_CHECK_TYPED(InternalError, common >= 0,
                      "BUG! Expected rank_cond to be true for at least one process. This indicates a bug in braid.");
    sync_module_states(false, true, common);
  } else if (join_buffer_sync_ && buffer_hook_location_ == BufferCommHookLocation::kPreForward) {
    if (active) sync_buffers();
    else run_buffer_hook_and_wait();
  }
  return sync;
}

void DistributedDataParallel::run_buffer_hook_and_wait() {
  for (const auto& f : buffer_hook_(named_synced_buffers())) (void)f.value();  // rethrows a failed one
}

DistributedDataParallel::Join::Join(DistributedDataParallel& ddp, bool divide_by_initial_world_size, bool enable,
                                    bool throw_on_early_termination)
    : ddp_(ddp), enable_(enable), uncaught_(std::uncaught_exceptions()) {
  if (!enable_) return;
  // A joined rank would have to shadow the delayed allreduce at its place among the Reducer's collectives.
  BRAID_CHECK_ARG(!ddp_.delayed_, "DistributedDataParallel::join: not supported with delay_all_reduce_named_params "
                  "(rank {})", ddp_.options_.process_group->rank());
  BRAID_CHECK_ARG(!ddp_.join_enabled_, "DistributedDataParallel::join: a Join is already active on this DDP");
  ddp_.join_enabled_ = true;
  ddp_.join_divide_by_initial_ = divide_by_initial_world_size;
  ddp_.join_throw_ = throw_on_early_termination;
  ddp_.join_exhausted_ = false;
  ddp_.join_iterations_ = 0;
}

DistributedDataParallel::Join::~Join() noexcept(false) {
  if (!enable_) return;
  const int rank = ddp_.options_.process_group->rank();
  const auto leave = [this] {
    ddp_.join_enabled_ = false;
    ddp_.reducer_->set_divisor(ddp_.options_.process_group->size());
  };
  if (std::uncaught_exceptions() > uncaught_) {
    leave();
    // With throw_on_early_termination this is the expected way out (every rank raises together).
    if (ddp_.join_throw_) {
      logging::get("braid.ddp")->info("rank {}: leaving DDP join because of an exception", rank);
    } else {
      logging::get("braid.ddp")->error("rank {}: leaving DDP join because of an exception; the other ranks will "
                                       "time out in their next collective", rank);
    }
    return;
  }
  std::exception_ptr exhausted;
  try {
    ddp_.join_finish();
  } catch (const std::exception& e) {
    // Only the early-termination error is meant for the caller (as PyTorch's join context raises it on
    // exit); anything else has already broken the group and is logged, as a destructor should not throw it.
    if (ddp_.join_exhausted_) {
      exhausted = std::current_exception();
    } else {
      logging::get("braid.ddp")->error("rank {}: DDP join failed: {}", rank, e.what());
    }
  }
  leave();
  if (exhausted) std::rethrow_exception(exhausted);
}

void DistributedDataParallel::join_finish() {
  // Shadow the ranks still training, one iteration at a time, until all have joined.
  while (true) {
    const double training = allreduce_scalar(0.0, collectives::ReduceOp::SUM);
    if (training == 0) break;
    if (join_throw_) {
      // The ranks still training raise at this same collective (join_forward_prologue).
      join_exhausted_ = true;
      BRAID_THROW(Error, "Rank {} exhausted all inputs. (DDP join with throw_on_early_termination, after {} "
                  "iterations; {} of {} ranks still training)", options_.process_group->rank(), join_iterations_,
                  training, options_.process_group->size());
    }
    const bool sync = join_sync_step(/*active=*/false);
    if (!sync) continue;
    if (join_buffer_sync_ && buffer_hook_ && buffer_hook_location_ == BufferCommHookLocation::kPostForward) {
      reducer_->prepare_for_forward();  // the training ranks' bucket rebuild (step 4) comes before their hook
      run_buffer_hook_and_wait();
    }
    reducer_->join_shadow_iteration();
  }
  // The last ranks to finish hold the most trained model: the highest of them is the source for all.
  const double most = allreduce_scalar(static_cast<double>(join_iterations_), collectives::ReduceOp::MAX);
  const int root = static_cast<int>(allreduce_scalar(
      join_iterations_ == static_cast<int64_t>(most) ? options_.process_group->rank() : -1.0, collectives::ReduceOp::MAX));
  sync_module_states(/*params=*/true, /*buffers=*/options_.broadcast_buffers, root);
}

}  // namespace braid::parallel
