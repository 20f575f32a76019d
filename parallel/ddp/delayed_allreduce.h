// DDP's delay_all_reduce_named_params (PyTorch's _delay_all_reduce_params, _delay_grad_buffer and
// _DDPSink): parameters whose gradients DDP does not put in buckets but all-reduces once, after the whole
// backward pass, as one flat buffer. PyTorch offers it for parameters whose reduction should not be
// interleaved with the buckets' (tensor-parallel layers, parameters that a later step reduces anyway).
//
// How it works, per synced iteration:
//   - before the forward, every delayed parameter's .grad is made a view of one flat buffer (a .grad that
//     is undefined becomes its zeroed view; one the caller replaced is copied in), so that autograd
//     accumulates the gradients straight into the buffer (in place: AccumulateGrad adds into a defined
//     .grad);
//   - the forward's outputs pass through a sink node (PyTorch's _DDPSink) whose backward runs first in the
//     backward pass and queues the reduction to the end of the pass (autograd::queue_callback). It is
//     queued before any Reducer callback (those are queued when the last bucket is launched), so every rank
//     issues the delayed allreduce at the same place among DDP's collectives;
//   - at the end of the pass, the buffer is divided by the world size and all-reduced (SUM), and waited
//     for: the gradients are averaged when backward returns.
// Under no_sync no sink is attached: the gradients accumulate in the buffer, and the next synced iteration
// reduces their sum, as for the bucketed parameters.
//
// With a launch parameter (PyTorch's param_to_hook_all_reduce, launch_after()), the allreduce starts as
// soon as that parameter's gradient has been accumulated, overlapping the rest of backward, and the end of
// the pass only waits for it. The caller picks a parameter whose gradient comes after every delayed one's
// (the module's first layer, say): the launch point is then the same on every rank, as the collectives'
// order requires. A delayed gradient accumulated after the launch would be missing from the result; the
// end of the pass then fails, naming it. So that such a gradient cannot be added into the buffer while the
// engine reads and writes it, the launch takes every delayed parameter that has no gradient yet in this
// pass off the buffer (.grad undefined): a late gradient lands in a tensor of its own, and the end of the
// pass gives the others back their reduced views. Unlike PyTorch (a hook on the gradient, before it is
// accumulated), the launch follows the accumulation, so the launch parameter may itself be delayed.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/core/process_group.h"
#include "tensor/tensor.h"

namespace braid::parallel {

class DelayedAllreduce : public std::enable_shared_from_this<DelayedAllreduce> {
 public:
  // `params`: one dtype and one device, dense, requiring grad (InvalidArgument naming the parameters
  // otherwise); `names` parallel to them, for the errors.
  static std::shared_ptr<DelayedAllreduce> create(std::vector<Tensor> params, std::vector<std::string> names,
                                                  std::shared_ptr<collectives::ProcessGroup> group);

  const std::vector<Tensor>& params() const { return params_; }
  const std::vector<std::string>& names() const { return names_; }
  // The flat gradient buffer the .grad views live in.
  const Tensor& buffer() const { return buffer_; }

  // Before a forward: every .grad becomes (or stays) a view of the buffer; accumulated values are kept.
  void prepare_grads();
  // After a forward whose backward is to sync: the outputs that require grad come back through the sink
  // node (the others unchanged). The returned tensors are the ones the caller must use.
  std::vector<Tensor> attach_sink(const std::vector<Tensor>& outputs);
  // Starts the allreduce once `param`'s gradient has been accumulated in a synced backward (see above).
  // `name` is for messages.
  void launch_after(const Tensor& param, std::string name);

 private:
  DelayedAllreduce(std::vector<Tensor> params, std::vector<std::string> names,
                   std::shared_ptr<collectives::ProcessGroup> group);
  void queue_reduction();  // from the sink's backward, on the backward pass's thread
  void reduce();           // the end-of-backward callback
  std::shared_ptr<collectives::Work> launch();  // buffer / ws, then the allreduce (not waited for)
  void on_launch_param_accumulated();
  void on_delayed_accumulated(size_t i);
  bool is_view(size_t i, const Tensor& grad) const;

  const std::vector<Tensor> params_;
  const std::vector<std::string> names_;
  const std::shared_ptr<collectives::ProcessGroup> group_;
  Tensor buffer_;
  std::vector<Tensor> views_;  // per parameter, a view of buffer_ shaped like it

  std::mutex mu_;
  bool queued_ = false;  // GUARDED_BY(mu_): the reduction of the running backward pass is queued
  std::string launch_param_;                        // empty: the reduction starts at the end of the pass
  std::shared_ptr<collectives::Work> launched_;     // GUARDED_BY(mu_): started by the launch parameter
  std::string late_;                                // GUARDED_BY(mu_): a delayed gradient after the launch
  std::vector<bool> accumulated_;  // GUARDED_BY(mu_): per parameter, its gradient arrived in this pass
  std::vector<size_t> detached_;   // GUARDED_BY(mu_): parameters taken off the buffer by the launch
};

}  // namespace braid::parallel
