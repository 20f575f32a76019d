// The Reducer's end of an iteration (waiting for the buckets and writing the averaged gradients back) and
// its one-time bucket rebuild.
#include <fmt/format.h>

#include <optional>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "parallel/ddp/bucket_assignment.h"
#include "parallel/control_device.h"
#include "parallel/ddp/reducer.h"
#include "tensor/factory.h"
#include "tensor/sparse.h"
#include "tensor/streaming_copy.h"

namespace braid::parallel {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Gives parameter `param` the gradient `value` where this backward pass keeps gradients: the distributed
// autograd context (the pass's sink) or .grad.
void assign_grad(const Tensor& param, const Tensor& value) {
  if (autograd::GradSink* sink = autograd::current_grad_sink()) {
    sink->accumulate(param, value);
  } else {
    autograd::set_grad(param, value);
  }
}

}  // namespace

void Reducer::finalize_backward() {
  std::vector<Future<Tensor>> results;
  std::vector<Future<Tensor>> buffer_futures;
  bool search_unused = false;
  std::vector<int32_t> local_used;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& b : buckets_) results.push_back(*b.result);
    buffer_futures.swap(post_backward_futures_);
    search_unused = options_.find_unused_parameters || options_.static_graph;
    local_used = local_used_;
  }
  // Without the used-map, each bucket is written back as soon as its own reduction is done, so that the
  // copies of the early buckets run while the later ones are still being reduced.
  const bool early_write_back = !search_unused;
  std::vector<Tensor> reduced;
  std::vector<int32_t> global_used;
  std::exception_ptr error;
  std::optional<Clock::time_point> reduced_at;  // the last bucket's reduction done (the end of comm_ms)
  try {
    for (size_t b = 0; b < results.size(); ++b) {
      reduced.push_back(results[b].value());
      if (b + 1 == results.size()) reduced_at = Clock::now();
      if (early_write_back) {
        std::lock_guard<std::mutex> lock(mu_);
        write_back(b, reduced.back(), global_used);
      }
    }
    if (search_unused) {
      // A parameter used on any rank gets the averaged gradient everywhere; one unused on every rank keeps
      // its .grad as it was (torch's test_global_local_unused_params_grad). An empty local unused set still
      // takes part: others may have some.
      Tensor used = from_vector(local_used, {static_cast<int64_t>(local_used.size())})
                        .to(control_device(*group_, params_.front()));
      collectives::TensorList list{used};
      group_->allreduce(list)->wait();
      used = used.cpu();
      global_used.resize(local_used.size());
      const int32_t* p = used.data<int32_t>();
      for (size_t i = 0; i < global_used.size(); ++i) global_used[i] = p[i];
    }
    // The buffers are synchronised when backward returns, as with PyTorch's installed futures.
    for (const auto& f : buffer_futures) (void)f.value();  // rethrows a failed buffer reduction
  } catch (...) {
    error = std::current_exception();
  }
  const auto done = reduced_at.value_or(Clock::now());
  std::lock_guard<std::mutex> lock(mu_);
  expect_hooks_ = false;
  require_finalize_ = false;
  if (error) std::rethrow_exception(error);
  if (!early_write_back) {
    for (size_t b = 0; b < buckets_.size(); ++b) write_back(b, reduced[b], global_used);
  }
  ++stats_.iteration;
  stats_.backward_compute_ms = ms_between(first_ready_, last_ready_);
  stats_.comm_ms = ms_between(first_launch_, done);
  const double overlapped = std::max(0.0, ms_between(first_launch_, last_ready_));
  stats_.overlap_fraction = stats_.comm_ms > 0 ? std::min(1.0, overlapped / stats_.comm_ms) : 0.0;
  stats_.bucket_launch_ms = launch_ms_;
  stats_.first_ready = first_ready_;
  stats_.last_ready = last_ready_;
}

void Reducer::install_post_backward_futures(std::vector<Future<Tensor>> futures) {
  std::vector<Future<Tensor>> stale;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stale.swap(post_backward_futures_);
    post_backward_futures_ = std::move(futures);
  }
  for (const auto& f : stale) (void)f.value();
}

void Reducer::write_back(size_t b, const Tensor& reduced, const std::vector<int32_t>& global_used) {
  Bucket& bucket = buckets_[b];
  const auto globally_unused = [&](size_t i) { return !global_used.empty() && global_used[i] == 0; };
  if (bucket.sparse) {
    const size_t i = bucket.variables[0];
    if (globally_unused(i)) return;
    BRAID_CHECK_ARG(reduced.defined() && reduced.shape() == params_[i].shape(),
                    "DDP: the comm hook's result for sparse bucket {} has shape {}, expected {}", b,
                    reduced.defined() ? shape_str(reduced.shape()) : "undefined", shape_str(params_[i].shape()));
    if (grads_[i].defined()) grads_[i].set_data(reduced);
    else assign_grad(params_[i], reduced);
    return;
  }
  BRAID_CHECK_ARG(reduced.defined() && reduced.numel() == bucket.buffer.numel() && reduced.dtype() == bucket.buffer.dtype(),
                  "DDP: the comm hook's result for bucket {} is {}, expected a tensor like the bucket's buffer {}", b,
                  reduced.defined() ? reduced.describe() : "undefined", bucket.buffer.describe());
  if (reduced.storage() != bucket.buffer.storage() || reduced.storage_offset() != bucket.buffer.storage_offset()) {
    bucket.buffer.copy_(reduced.reshape({reduced.numel()}));
  }
  if (hand_over_buffer(b, global_used)) return;
  const bool into_grad = autograd::current_grad_sink() == nullptr;
  for (size_t slot = 0; slot < bucket.variables.size(); ++slot) {
    const size_t i = bucket.variables[slot];
    if (globally_unused(i)) continue;
    const Tensor& view = bucket.views[slot];
    const Tensor& g = grads_[i];
    if (g.defined() && g.storage() == bucket.buffer.storage()) continue;  // .grad is the slot already
    if (as_view_ && into_grad) {
      autograd::set_grad(params_[i], view);
    } else if (g.defined()) {
      copy_scaled_streaming(g, view);  // read next by the optimizer, after the other buckets' copies
    } else {
      assign_grad(params_[i], view.to(params_[i].dtype()).clone());
    }
  }
}

// Without gradient_as_bucket_view PyTorch copies each averaged slot back into .grad. When every gradient of
// the bucket was created by this backward (no .grad before it: zero_grad(set_to_none) or the first step),
// nobody else has seen those tensors yet, so .grad becomes the slot itself and the bucket takes a fresh
// buffer from the allocator for the next iteration: the same values and the same memory, without a pass
// over the whole model's gradients after the last reduction. A .grad that existed before backward keeps
// its identity and gets the values copied in, as in PyTorch.
bool Reducer::hand_over_buffer(size_t b, const std::vector<int32_t>& global_used) {
  Bucket& bucket = buckets_[b];
  // CPU buckets only: there the copy is a memory-bound pass that the step waits for; on a GPU it is a
  // small fraction of the step, and the copy path is the one the GPU tests have run on an H200.
  if (as_view_ || bucket.sparse || !bucket.buffer.device().is_cpu() || autograd::current_grad_sink() != nullptr) {
    return false;
  }
  for (size_t i : bucket.variables) {
    const bool globally_unused = !global_used.empty() && global_used[i] == 0;
    // (A bucket's parameters share its device: build_buckets checks it. Its dtype is reduce_dtype.)
    if (had_grad_.at(i) || globally_unused || bucket.buffer.dtype() != params_[i].dtype()) return false;
  }
  for (size_t slot = 0; slot < bucket.variables.size(); ++slot) {
    const size_t i = bucket.variables[slot];
    autograd::set_grad(params_[i], bucket.views[slot]);
    grads_[i] = Tensor();  // the gradient this backward made goes back to the allocator now
  }
  // Every slot is written again before the next launch (a gradient, or zeros for an unused parameter).
  attach_buffer(bucket,
                group_->empty_shared({bucket.buffer.numel()}, bucket.buffer.dtype(), bucket.buffer.device()));
  return true;
}

void Reducer::join_shadow_iteration() {
  std::vector<Future<Tensor>> results;
  bool search_unused = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    BRAID_CHECK_ARG(!require_finalize_, "DDP join: a rank cannot shadow others while its own backward is unfinished");
    rebuild_buckets();
    for (size_t b = 0; b < buckets_.size(); ++b) {
      Bucket& bucket = buckets_[b];
      if (bucket.sparse) {
        const Tensor& p = params_[bucket.variables[0]];
        bucket.sparse_grad = SparseTensor::from_dense(zeros(p.shape(), TensorOptions(p.dtype(), p.device()))).to_tensor();
      } else {
        bucket.buffer.zero_();
      }
      results.push_back(run_comm_hook(b));
    }
    search_unused = options_.find_unused_parameters || options_.static_graph;
  }
  for (auto& f : results) (void)f.value();
  if (search_unused) {
    Tensor used = zeros({static_cast<int64_t>(params_.size())},
                        TensorOptions(DType::Int32, control_device(*group_, params_.front())));
    collectives::TensorList list{used};
    group_->allreduce(list)->wait();
  }
}

void Reducer::rebuild_buckets() {
  if (rebuilt_ || (options_.find_unused_parameters && !options_.static_graph)) return;
  if (ready_order_.size() != params_.size()) return;  // the first iteration has not finished
  // Every rank must bucket the same way: rank 0's ready order wins.
  std::vector<int64_t> order(ready_order_.begin(), ready_order_.end());
  Tensor t = from_vector(order, {static_cast<int64_t>(order.size())}).to(control_device(*group_, params_.front()));
  collectives::TensorList list{t};
  collectives::BroadcastOptions bo;
  bo.root_rank = 0;
  group_->broadcast(list, bo)->wait();
  t = t.cpu();
  const int64_t* agreed = t.data<int64_t>();
  std::vector<Tensor> walked;
  std::vector<bool> sparse;
  std::vector<size_t> position_to_param;
  for (size_t k = 0; k < params_.size(); ++k) {
    const auto i = static_cast<size_t>(agreed[k]);
    BRAID_CHECK_TYPED(InternalError, i < params_.size(), "DDP: rank 0's bucket order names parameter {} of {}", i,
                      params_.size());
    position_to_param.push_back(i);
    walked.push_back(params_[i]);
    sparse.push_back(expect_sparse_[i]);
  }
  const BucketAssignment a =
      compute_bucket_assignment_by_size(walked, {options_.first_bucket_bytes, options_.bucket_bytes_cap}, sparse);
  std::vector<std::vector<size_t>> buckets;
  for (const auto& positions : a.buckets) {
    std::vector<size_t> vars;
    for (size_t pos : positions) vars.push_back(position_to_param[pos]);
    buckets.push_back(std::move(vars));
  }
  build_buckets(buckets);
  rebuilt_ = true;
  ++stats_.rebuilds;
  ready_order_.clear();
}

std::optional<std::vector<std::vector<size_t>>> Reducer::rebuilt_bucket_indices() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!rebuilt_) return std::nullopt;
  std::vector<std::vector<size_t>> out;
  for (const auto& b : buckets_) out.push_back(b.variables);
  return out;
}

void Reducer::restore_rebuilt_buckets(const std::vector<std::vector<size_t>>& buckets) {
  std::lock_guard<std::mutex> lock(mu_);
  BRAID_CHECK_ARG(!expect_hooks_ && !require_finalize_,
                  "DDP: buckets can only be restored between iterations, not during a backward");
  size_t count = 0;
  for (const auto& b : buckets) count += b.size();
  BRAID_CHECK_ARG(count == params_.size(), "DDP: the restored buckets hold {} parameters, the model has {}", count,
                  params_.size());
  build_buckets(buckets);  // checks each index once, and one dtype and device per bucket
  rebuilt_ = true;
  ready_order_.clear();
}

}  // namespace braid::parallel
