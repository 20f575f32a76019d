// DistributedDataParallel: data parallelism over a process group (torch.nn.parallel.DistributedDataParallel:
// its constructor options and defaults, parameter selection, buckets, unused parameters, no_sync and buffer
// broadcasts).
//
//   auto ddp = std::make_shared<DistributedDataParallel>(model, DDPOptions{.process_group = group});
//   Tensor loss = mse_loss(ddp->forward(x), y);
//   autograd::backward(loss);             // gradients are averaged over the group while backward runs
//   optimizer.step();
//
// Construction checks that every rank has the same parameters (count, shapes, dtypes: an error names the
// rank and the parameter), broadcasts rank 0's parameters and buffers, and builds the Reducer (parallel/
// ddp/reducer.h) with one bucket per dtype and device for the first iteration; the buckets are rebuilt
// once, after it, in the order gradients became ready, with the first bucket capped at 1 MiB and the
// others at bucket_cap_mb. Each forward broadcasts rank 0's buffers first (broadcast_buffers) and arms the
// Reducer for the coming backward unless grad sync is off (no_sync()) or grad mode is.
//
// Inside a distributed autograd context the averaged gradients go to the context's gradient map instead
// of .grad: the Reducer writes into whatever gradient the backward pass accumulated.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectives/core/process_group.h"
#include "nn/module.h"
#include "parallel/ddp/comm_hook.h"
#include "parallel/ddp/delayed_allreduce.h"
#include "parallel/ddp/mixed_precision.h"
#include "parallel/ddp/reducer.h"

namespace braid::parallel {

using nn::TensorList;

struct DDPOptions {
  std::shared_ptr<collectives::ProcessGroup> process_group;  // required
  // Empty, or the one device of a single-device GPU module.
  std::vector<Device> device_ids;
  bool broadcast_buffers = true;
  double bucket_cap_mb = 25;
  bool find_unused_parameters = false;
  bool check_reduction = false;  // accepted for compatibility; no effect (deprecated in PyTorch too)
  bool gradient_as_bucket_view = false;
  bool static_graph = false;
  // Parameter and buffer names (as named_parameters() gives them; a leading '.' is ignored) that DDP
  // neither reduces nor broadcasts.
  std::vector<std::string> params_and_buffers_to_ignore;
  // PyTorch's delay_all_reduce_named_params: (name, parameter) pairs whose gradients are not bucketed but
  // all-reduced together, once, at the end of each synced backward (parallel/ddp/delayed_allreduce.h).
  // They must share one dtype and device. Independent of params_and_buffers_to_ignore, as in PyTorch: a
  // parameter in both lists is still delayed. When every parameter that requires grad is delayed or
  // ignored, DDP builds no Reducer and its forward is the module's (no buffer broadcast), as PyTorch's
  // _delay_all_reduce_all_params. Not supported with join() nor inside distributed autograd.
  std::vector<std::pair<std::string, Tensor>> delay_all_reduce_named_params;
  // PyTorch's param_to_hook_all_reduce: with delay_all_reduce_named_params, the delayed allreduce starts as
  // soon as this parameter's gradient has been accumulated (overlapping the rest of backward) instead of at
  // the end of the pass; pick one whose gradient comes after every delayed one's (delayed_allreduce.h).
  // Undefined: at the end of the pass. Needs delay_all_reduce_named_params.
  Tensor param_to_hook_all_reduce;
  // Mixed precision (PyTorch's DDP _MixedPrecision). param_dtype: forward and backward run on
  // low-precision copies of the floating parameters (and floating inputs are cast to it), while the
  // parameters keep their full-precision values and get full-precision gradients (mixed_precision.h).
  // reduce_dtype: the buckets hold and communicate gradients in it (default: param_dtype when that is
  // set). buffer_dtype: floating buffers are cast to it at construction.
  struct MixedPrecision {
    std::optional<DType> param_dtype;
    std::optional<DType> reduce_dtype;
    std::optional<DType> buffer_dtype;
  };
  MixedPrecision mixed_precision;
};

class DistributedDataParallel : public nn::Module {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions options);
  ~DistributedDataParallel() override;

  Tensor forward(const Tensor& input) override;
  TensorList forward_many(const TensorList& inputs) override;

  nn::Module& module() const { return *module_; }
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
  collectives::ProcessGroup& process_group() const { return *options_.process_group; }
  // Throws when there is none (every parameter delayed or ignored).
  Reducer& reducer() const;
  // Null without delay_all_reduce_named_params.
  const std::shared_ptr<DelayedAllreduce>& delayed_allreduce() const { return delayed_; }

  // Once per DDP (built-in or not): "register_comm_hook or register_builtin_comm_hook can only be called
  // once."
  void register_comm_hook(NamedCommHook hook);

  // PyTorch's _register_buffer_comm_hook: `hook` replaces the broadcast of rank 0's buffers, at
  // `location` (comm_hook.h). Runs when the broadcast would: broadcast_buffers, grad sync on (not under
  // no_sync), some buffer to sync; never without a Reducer. A later registration replaces an earlier one,
  // as in PyTorch. Not supported with join() (PyTorch's join hook does not support it either).
  void register_buffer_comm_hook(BufferCommHook hook,
                                 BufferCommHookLocation location = BufferCommHookLocation::kPostForward);

  // While alive, backward passes accumulate gradients locally; the first synced iteration after it
  // reduces their sum. Restores the previous setting when destroyed (also on exceptions).
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp), prev_(ddp.require_backward_grad_sync_) {
      ddp_.require_backward_grad_sync_ = false;
    }
    ~NoSync() { ddp_.require_backward_grad_sync_ = prev_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  NoSync no_sync() { return NoSync(*this); }
  bool require_backward_grad_sync() const { return require_backward_grad_sync_; }

  // Uneven inputs (PyTorch's ddp.join() and its join hook): create it on every rank before the training loop
  // and let it go after. While it lives, each forward first counts the ranks still training; a rank whose
  // loop ended waits in the destructor, shadowing the others' iterations (it joins their collectives with
  // zero gradients) until every rank has ended, then all ranks take the parameters and buffers of the
  // last rank to finish (the highest one). divide_by_initial_world_size: averages divide by the initial
  // world size (joined ranks count as zeros) or, when false, by the ranks still training. enable = false
  // makes it a no-op. Left by an exception, it does not shadow (the others then fail on their timeouts).
  //
  // throw_on_early_termination: instead of shadowing, every rank raises braid::Error as soon as one rank
  // has run out of inputs: the ranks still training from their next forward ("Detected at least one rank
  // that exhausted inputs. Throwing across all ranks."), the exhausted ones from the Join's destructor
  // ("Rank r exhausted all inputs."), which is why the destructor may throw. The final model is then not
  // synchronised, but no collective is left pending: the DDP stays usable on every rank.
  class Join {
   public:
    Join(DistributedDataParallel& ddp, bool divide_by_initial_world_size, bool enable,
         bool throw_on_early_termination = false);
    ~Join() noexcept(false);
    Join(const Join&) = delete;
    Join& operator=(const Join&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool enable_;
    int uncaught_;
  };
  Join join(bool divide_by_initial_world_size = true, bool enable = true, bool throw_on_early_termination = false) {
    return Join(*this, divide_by_initial_world_size, enable, throw_on_early_termination);
  }

  // PyTorch's _get_ddp_logging_data: buckets, rebuilds, the comm hook, timings of the last iteration
  // (empty without a Reducer).
  ReducerStats logging_data() const { return reducer_ ? reducer_->stats() : ReducerStats{}; }
  // The Reducer's buckets once rebuilt (nullopt before, or without a Reducer), and back: what a checkpoint
  // carries (Reducer::rebuilt_bucket_indices). Restoring into a DDP without a Reducer is an error.
  std::optional<std::vector<std::vector<size_t>>> rebuilt_buckets() const {
    return reducer_ ? reducer_->rebuilt_bucket_indices() : std::nullopt;
  }
  void restore_rebuilt_buckets(const std::vector<std::vector<size_t>>& buckets) { reducer().restore_rebuilt_buckets(buckets); }
  // The managed parameters, in registration order, and their names.
  const std::vector<Tensor>& managed_parameters() const { return params_; }
  const std::vector<std::string>& managed_parameter_names() const { return param_names_; }

 private:
  void collect_parameters();
  void verify_params_across_processes(const std::vector<Tensor>& params, const std::vector<std::string>& names);
  void sync_module_states(bool params, bool buffers, int root = 0);
  double allreduce_scalar(double value, collectives::ReduceOp op);
  // Join: the collectives every forward adds while a Join lives (count of training ranks, the global
  // grad-sync flag, the buffers' source), and a joined rank's stand-in for one iteration of the others.
  bool join_forward_prologue(bool active);
  bool join_sync_step(bool active);  // steps 2 and 3: the global grad-sync flag, then the buffers
  void join_finish();
  void run_buffer_hook_and_wait();  // a joined rank's call of the buffer hook: no backward will wait for it
  std::vector<Tensor> synced_buffers() const;
  std::map<std::string, Tensor> named_synced_buffers() const;
  bool will_sync_module_buffers() const;
  void sync_buffers();  // the buffer hook, or the broadcast from rank 0
  void before_forward();
  TensorList after_forward(TensorList outputs);
  TensorList cast_inputs(const TensorList& inputs) const;

  std::shared_ptr<nn::Module> module_;
  DDPOptions options_;
  std::vector<Tensor> params_;
  std::vector<std::string> param_names_;
  std::vector<bool> expect_sparse_;
  std::shared_ptr<Reducer> reducer_;                // null when every parameter is delayed or ignored
  std::shared_ptr<DelayedAllreduce> delayed_;       // set with delay_all_reduce_named_params
  BufferCommHook buffer_hook_;                      // empty: broadcast from rank 0
  BufferCommHookLocation buffer_hook_location_ = BufferCommHookLocation::kPostForward;
  std::shared_ptr<ParamPrecision> param_precision_;  // set with mixed_precision.param_dtype
  bool require_backward_grad_sync_ = true;
  bool join_enabled_ = false;
  bool join_divide_by_initial_ = true;
  bool join_throw_ = false;      // throw_on_early_termination of the current Join
  bool join_exhausted_ = false;  // join_finish threw because this rank ran out of inputs first
  int64_t join_iterations_ = 0;  // forwards run inside the current Join
  bool join_buffer_sync_ = false;  // the Join's verdict on this iteration's buffer sync (every rank agrees)
};

}  // namespace braid::parallel
