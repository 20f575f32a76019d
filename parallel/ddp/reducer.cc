#include "parallel/ddp/reducer.h"

#include <fmt/format.h>

#include "autograd/accumulate_grad.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "tensor/factory.h"
#include "tensor/sparse.h"
#include "tensor/streaming_copy.h"

namespace braid::parallel {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

std::shared_ptr<Reducer> Reducer::create(std::vector<Tensor> params, std::vector<std::string> names,
                                         std::vector<std::vector<size_t>> bucket_indices,
                                         std::shared_ptr<collectives::ProcessGroup> group,
                                         std::vector<bool> expect_sparse_gradient, ReducerOptions options) {
  BRAID_CHECK_ARG(group != nullptr, "Reducer: a process group is needed");
  BRAID_CHECK_ARG(!params.empty(), "Reducer: no parameters to reduce");
  if (expect_sparse_gradient.empty()) expect_sparse_gradient.assign(params.size(), false);
  BRAID_CHECK_ARG(expect_sparse_gradient.size() == params.size(), "Reducer: {} sparse flags for {} parameters",
                  expect_sparse_gradient.size(), params.size());
  std::shared_ptr<Reducer> r(new Reducer(std::move(params), std::move(names), std::move(group),
                                         std::move(expect_sparse_gradient), options));
  {
    std::lock_guard<std::mutex> lock(r->mu_);
    r->build_buckets(bucket_indices);
  }
  r->install_hooks();
  return r;
}

Reducer::Reducer(std::vector<Tensor> params, std::vector<std::string> names,
                 std::shared_ptr<collectives::ProcessGroup> group, std::vector<bool> expect_sparse_gradient,
                 ReducerOptions options)
    : params_(std::move(params)), names_(std::move(names)), group_(std::move(group)),
      expect_sparse_(std::move(expect_sparse_gradient)), options_(options), divisor_(group_->size()) {
  ready_.assign(params_.size(), false);
  grads_.resize(params_.size());
  local_used_.assign(params_.size(), 0);
}

Reducer::~Reducer() = default;

std::string Reducer::describe(size_t index) const {
  if (index < names_.size() && !names_[index].empty()) return fmt::format("{} (parameter {})", names_[index], index);
  return fmt::format("parameter {}", index);
}

void Reducer::log_and_throw(const std::string& message) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.has_error = true;
    stats_.error = message;
  }
  BRAID_THROW(InvalidArgument, "{}", message);
}

void Reducer::build_buckets(const std::vector<std::vector<size_t>>& bucket_indices) {
  std::vector<bool> seen(params_.size(), false);
  std::vector<Bucket> buckets;
  std::vector<std::pair<size_t, size_t>> locator(params_.size());
  for (size_t b = 0; b < bucket_indices.size(); ++b) {
    const auto& vars = bucket_indices[b];
    BRAID_CHECK_ARG(!vars.empty(), "Reducer: bucket {} is empty", b);
    Bucket bucket;
    bucket.variables = vars;
    const Tensor& first = params_.at(vars.front());
    int64_t numel = 0;
    for (size_t slot = 0; slot < vars.size(); ++slot) {
      const size_t i = vars[slot];
      BRAID_CHECK_ARG(i < params_.size() && !seen[i], "Reducer: parameter index {} appears twice or is out of range "
                      "(bucket {})", i, b);
      seen[i] = true;
      locator[i] = {b, slot};
      const Tensor& p = params_[i];
      BRAID_CHECK_ARG(p.dtype() == first.dtype(),
                      "Reducer: bucket {} mixes dtypes: {} is {} but {} is {}; a bucket holds one dtype", b,
                      describe(vars.front()), dtype_name(first.dtype()), describe(i), dtype_name(p.dtype()));
      BRAID_CHECK_ARG(p.device() == first.device(), "Reducer: bucket {} mixes devices ({} and {})", b,
                      first.device().str(), p.device().str());
      if (expect_sparse_[i]) {
        BRAID_CHECK_ARG(vars.size() == 1, "Reducer: {} expects a sparse gradient and must have a bucket of its own "
                        "(bucket {} has {} parameters)", describe(i), b, vars.size());
        bucket.sparse = true;
      }
      numel += p.numel();
    }
    if (!bucket.sparse) {
      const DType dtype = options_.reduce_dtype.value_or(first.dtype());
      BRAID_CHECK_ARG(is_floating(dtype), "Reducer: reduce_dtype must be floating, got {}", dtype_name(dtype));
      // From the group's shared memory on the CPU: the bucket's allreduce then skips the engine's copies.
      attach_buffer(bucket, group_->empty_shared({numel}, dtype, first.device()).zero_());
    }
    buckets.push_back(std::move(bucket));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    BRAID_CHECK_ARG(seen[i], "Reducer: {} is in no bucket", describe(i));
  }
  buckets_ = std::move(buckets);
  locator_ = std::move(locator);
  as_view_ = options_.gradient_as_bucket_view;
  for (const auto& b : buckets_) {
    if (!b.sparse && b.buffer.dtype() != params_[b.variables[0]].dtype()) as_view_ = false;
  }
  if (as_view_) {
    // Existing gradients move into their slots, and .grad becomes the slot.
    for (size_t i = 0; i < params_.size(); ++i) {
      auto [b, slot] = locator_[i];
      if (buckets_[b].sparse) continue;
      const Tensor g = autograd::grad(params_[i]);
      if (g.defined()) {
        buckets_[b].views[slot].copy_(g);
        autograd::set_grad(params_[i], buckets_[b].views[slot]);
      }
    }
  }
  stats_.bucket_bytes.clear();
  for (const auto& b : buckets_) {
    size_t bytes = 0;
    for (size_t i : b.variables) bytes += static_cast<size_t>(params_[i].nbytes());
    stats_.bucket_bytes.push_back(bytes);
  }
}

void Reducer::attach_buffer(Bucket& bucket, Tensor buffer) {
  bucket.buffer = std::move(buffer);
  bucket.views.clear();
  int64_t offset = 0;
  for (size_t i : bucket.variables) {
    const Tensor& p = params_[i];
    bucket.views.push_back(bucket.buffer.slice(0, offset, offset + p.numel()).view(p.shape()));
    offset += p.numel();
  }
}

void Reducer::install_hooks() {
  std::weak_ptr<Reducer> weak = weak_from_this();
  for (size_t i = 0; i < params_.size(); ++i) {
    autograd::register_post_accumulate_grad_hook(params_[i], [weak, i](const Tensor&, const Tensor& grad) {
      if (auto self = weak.lock()) self->autograd_hook(i, grad);
    });
  }
}

void Reducer::register_comm_hook(NamedCommHook hook) {
  BRAID_CHECK_ARG(hook.hook != nullptr, "register_comm_hook: Communication hook must be callable.");
  std::unique_lock<std::mutex> lock(mu_);
  if (hook_) {
    lock.unlock();
    log_and_throw("register_comm_hook or register_builtin_comm_hook can only be called once.");
  }
  stats_.comm_hook = hook.name;
  hook_ = std::move(hook);
}

void Reducer::set_divisor(double divisor) {
  BRAID_CHECK_ARG(divisor > 0, "Reducer: the divisor must be positive, got {}", divisor);
  std::lock_guard<std::mutex> lock(mu_);
  divisor_ = divisor;
}

std::vector<std::vector<size_t>> Reducer::bucket_indices() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::vector<size_t>> out;
  for (const auto& b : buckets_) out.push_back(b.variables);
  return out;
}

ReducerStats Reducer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

bool Reducer::expecting_hooks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return expect_hooks_;
}

std::vector<size_t> Reducer::unready_variables() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < ready_.size(); ++i) {
    if (!ready_[i]) out.push_back(i);
  }
  return out;
}

void Reducer::prepare_for_forward() {
  std::unique_lock<std::mutex> lock(mu_);
  if (require_finalize_) {
    std::string names;
    for (size_t i : unready_variables()) names += (names.empty() ? "" : ", ") + describe(i);
    lock.unlock();
    log_and_throw(fmt::format(
        "Expected to have finished reduction in the prior iteration before starting a new one. This error "
        "indicates that your module has parameters that were not used in producing loss. You can enable unused "
        "parameter detection by passing the keyword argument `find_unused_parameters=True` to "
        "`DistributedDataParallel`, and by making sure all `forward` function outputs participate in calculating "
        "loss. Parameters that did not receive grad on rank {}: {}", group_->rank(), names));
  }
  rebuild_buckets();
}

void Reducer::prepare_for_backward(const std::vector<Tensor>& outputs) {
  std::unique_lock<std::mutex> lock(mu_);
  if (require_finalize_) {
    lock.unlock();
    prepare_for_forward();  // throws the unfinished-reduction error
    return;
  }
  expect_hooks_ = true;
  next_bucket_ = 0;
  finalize_queued_ = false;
  marked_unused_ = false;
  ready_.assign(params_.size(), false);
  std::fill(grads_.begin(), grads_.end(), Tensor());
  had_grad_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) had_grad_[i] = autograd::grad(params_[i]).defined();
  std::fill(local_used_.begin(), local_used_.end(), 0);
  for (auto& b : buckets_) {
    b.pending = b.variables.size();
    b.result.reset();
    b.sparse_grad = Tensor();
  }
  unused_.clear();
  const bool search = options_.find_unused_parameters || (options_.static_graph && !static_unused_);
  if (options_.static_graph && static_unused_) {
    unused_ = *static_unused_;
  } else if (search) {
    // Walk the graph from the outputs; parameters whose accumulator is not reached are unused here.
    std::unordered_map<const TensorImpl*, size_t> index;
    for (size_t i = 0; i < params_.size(); ++i) index.emplace(params_[i].unsafe_impl(), i);
    std::vector<bool> reached(params_.size(), false);
    std::vector<autograd::Node*> stack;
    std::unordered_map<autograd::Node*, bool> seen;
    for (const auto& out : outputs) {
      const autograd::Edge e = autograd::gradient_edge(out);
      if (e.valid() && !seen[e.function.get()]) {
        seen[e.function.get()] = true;
        stack.push_back(e.function.get());
      }
    }
    while (!stack.empty()) {
      autograd::Node* n = stack.back();
      stack.pop_back();
      if (auto* acc = dynamic_cast<autograd::AccumulateGrad*>(n)) {
        auto it = index.find(acc->leaf().unsafe_impl());
        if (it != index.end()) reached[it->second] = true;
      }
      for (const auto& e : n->next_edges()) {
        if (e.valid() && !seen[e.function.get()]) {
          seen[e.function.get()] = true;
          stack.push_back(e.function.get());
        }
      }
    }
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!reached[i]) unused_.push_back(i);
    }
    if (options_.static_graph) static_unused_ = unused_;
  }
}

void Reducer::autograd_hook(size_t index, const Tensor& grad) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!expect_hooks_) return;  // no_sync, or a backward DDP did not prepare: gradients stay local
  const auto now = Clock::now();
  if (!require_finalize_) {
    require_finalize_ = true;
    first_ready_ = now;
    launch_ms_.assign(buckets_.size(), 0);
  }
  last_ready_ = now;
  local_used_[index] = 1;
  if (!marked_unused_) {
    marked_unused_ = true;
    for (size_t u : unused_) mark_variable_ready(u, Tensor());
  }
  mark_variable_ready(index, grad);
  launch_ready_buckets();
  if (next_bucket_ == buckets_.size() && !finalize_queued_) {
    finalize_queued_ = true;
    std::weak_ptr<Reducer> weak = weak_from_this();
    autograd::queue_callback([weak] {
      if (auto self = weak.lock()) self->finalize_backward();
    });
  }
}

void Reducer::mark_variable_ready(size_t index, const Tensor& grad) {
  if (ready_[index]) {
    BRAID_THROW(InvalidArgument,
                "Expected to mark a variable ready only once. {} was marked ready twice in one backward pass on "
                "rank {} (a parameter used in several reentrant backward passes, or by several distributed "
                "autograd messages, cannot be reduced by DDP)", describe(index), group_->rank());
  }
  ready_[index] = true;
  if (!rebuilt_) ready_order_.push_back(index);
  grads_[index] = grad;
  auto [b, slot] = locator_[index];
  Bucket& bucket = buckets_[b];
  if (bucket.sparse) {
    bucket.sparse_grad = grad;
  } else if (!grad.defined()) {
    bucket.views[slot].zero_();
  } else if (hook_) {  // a comm hook gets the local gradients, undivided
    if (grad.storage() != bucket.buffer.storage()) {
      copy_scaled_streaming(bucket.views[slot], grad.is_sparse() ? grad.sparse().to_dense() : grad);
    }
  } else if (grad.storage() != bucket.buffer.storage()) {
    // The default hook averages: the division by the world size happens here, in the copy into the bucket,
    // instead of in a separate pass over the whole bucket at launch. The bucket is read next by the
    // engine, after more of backward has run: streaming stores (see streaming_copy.h).
    copy_scaled_streaming(bucket.views[slot], grad.is_sparse() ? grad.sparse().to_dense() : grad, 1.0 / divisor_);
  } else {
    bucket.views[slot].mul_(1.0 / divisor_);  // .grad is the slot (gradient_as_bucket_view)
  }
  --bucket.pending;
}

void Reducer::launch_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    const size_t b = next_bucket_++;
    if (b == 0) first_launch_ = Clock::now();
    launch_ms_[b] = ms_between(first_ready_, Clock::now());
    buckets_[b].result = run_comm_hook(b);
  }
}

Future<Tensor> Reducer::run_comm_hook(size_t b) {
  Bucket& bucket = buckets_[b];
  const bool is_last = b + 1 == buckets_.size();
  if (hook_) {
    std::vector<Tensor> params;
    for (size_t i : bucket.variables) params.push_back(params_[i]);
    const Tensor buffer = bucket.sparse ? bucket.sparse_grad : bucket.buffer;
    std::vector<Tensor> grads = bucket.sparse ? std::vector<Tensor>{bucket.sparse_grad} : bucket.views;
    GradBucket gb(b, buckets_.size(), buffer, std::move(grads), std::move(params), is_last);
    return hook_->hook(gb);
  }
  // The default: average = allreduce of buffer / divisor.
  const double divisor = divisor_;
  collectives::TensorList list;
  if (bucket.sparse) {
    list.push_back(bucket.sparse_grad.defined() ? bucket.sparse_grad
                                                : SparseTensor::from_dense(zeros(params_[bucket.variables[0]].shape(),
                                                      TensorOptions(params_[bucket.variables[0]].dtype())))
                                                      .to_tensor());
  } else {
    list.push_back(bucket.buffer);  // already divided: mark_variable_ready scales each slot as it fills it
  }
  auto work = group_->allreduce(list);
  const bool sparse = bucket.sparse;
  return work->get_future().then(
      [sparse, divisor](const collectives::TensorList& out) -> Tensor {
        return sparse ? out.at(0).sparse().mul(1.0 / divisor).to_tensor() : out.at(0);
      },
      fmt::format("DDP bucket {} allreduce", b));
}

}  // namespace braid::parallel
