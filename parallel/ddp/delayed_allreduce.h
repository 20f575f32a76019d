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
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/process_group.h"
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

 private:
  DelayedAllreduce(std::vector<Tensor> params, std::vector<std::string> names,
                   std::shared_ptr<collectives::ProcessGroup> group);
  void queue_reduction();  // from the sink's backward, on the backward pass's thread
  void reduce();           // the end-of-backward callback
  bool is_view(size_t i, const Tensor& grad) const;

  const std::vector<Tensor> params_;
  const std::vector<std::string> names_;
  const std::shared_ptr<collectives::ProcessGroup> group_;
  Tensor buffer_;
  std::vector<Tensor> views_;  // per parameter, a view of buffer_ shaped like it

  std::mutex mu_;
  bool queued_ = false;  // GUARDED_BY(mu_): the reduction of the running backward pass is queued
};

}  // namespace braid::parallel
