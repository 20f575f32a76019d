#include "parallel/ddp/ddp.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "autograd/ops/shape.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "nn/embedding.h"
#include "parallel/ddp/bucket_assignment.h"
#include "parallel/control_device.h"
#include "tensor/factory.h"

namespace braid::parallel {

namespace {

std::string normalise(std::string name) {
  // torch's DDP names a parameter f"{module_name}.{param_name}", which starts with '.' for the root's own.
  if (!name.empty() && name.front() == '.') name.erase(0, 1);
  return name;
}

// One rank's description of its parameters: count, then per parameter dtype, ndim and sizes.
std::vector<int64_t> describe_params(const std::vector<Tensor>& params) {
  std::vector<int64_t> d{static_cast<int64_t>(params.size())};
  for (const auto& p : params) {
    d.push_back(static_cast<int64_t>(p.dtype()));
    d.push_back(p.dim());
    for (int64_t s : p.shape()) d.push_back(s);
  }
  return d;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions options)
    : nn::Module("DistributedDataParallel"), module_(std::move(module)), options_(std::move(options)) {
  BRAID_CHECK_ARG(module_ != nullptr, "DistributedDataParallel: module must not be null");
  BRAID_CHECK_ARG(options_.process_group != nullptr, "DistributedDataParallel: a process group is needed");
  BRAID_CHECK_ARG(options_.device_ids.size() <= 1, "device_ids can only be None or contain a single element.");
  BRAID_CHECK_ARG(options_.bucket_cap_mb > 0, "DistributedDataParallel: bucket_cap_mb must be positive, got {}",
                  options_.bucket_cap_mb);
  register_module("module", module_);
  collect_parameters();

  if (const auto dt = options_.mixed_precision.buffer_dtype) {
    BRAID_CHECK_ARG(is_floating(*dt), "DistributedDataParallel: buffer_dtype must be floating, got {}", dtype_name(*dt));
    autograd::NoGradGuard no_grad;
    for (auto& b : synced_buffers()) {
      if (is_floating(b.dtype()) && b.dtype() != *dt) b.set_data(b.to(*dt));
    }
  }
  {
    // Every rank's model is checked and rank 0's broadcast, the delayed parameters included.
    std::vector<Tensor> all = params_;
    std::vector<std::string> names = param_names_;
    if (delayed_) {
      all.insert(all.end(), delayed_->params().begin(), delayed_->params().end());
      names.insert(names.end(), delayed_->names().begin(), delayed_->names().end());
    }
    verify_params_across_processes(all, names);
  }
  sync_module_states(/*params=*/true, /*buffers=*/true);
  if (params_.empty()) return;  // all delayed or ignored: no Reducer (PyTorch's _delay_all_reduce_all_params)

  // Installed before the Reducer's hooks, so that its restore runs before the Reducer's write-back.
  if (const auto dt = options_.mixed_precision.param_dtype) param_precision_ = ParamPrecision::create(params_, *dt);

  ReducerOptions ro;
  ro.find_unused_parameters = options_.find_unused_parameters;
  ro.gradient_as_bucket_view = options_.gradient_as_bucket_view;
  ro.static_graph = options_.static_graph;
  ro.bucket_bytes_cap = static_cast<size_t>(options_.bucket_cap_mb * 1024 * 1024);
  ro.reduce_dtype = options_.mixed_precision.reduce_dtype ? options_.mixed_precision.reduce_dtype
                                                          : options_.mixed_precision.param_dtype;
  // First iteration: one bucket per dtype and device unless unused parameters are searched each
  // iteration (then the final limits at once); reversed, so that the last layers go first (as PyTorch's
  // Reducer does).
  std::vector<size_t> limits{std::numeric_limits<size_t>::max()};
  if (options_.find_unused_parameters && !options_.static_graph) limits = {ro.first_bucket_bytes, ro.bucket_bytes_cap};
  BucketAssignment a = compute_bucket_assignment_by_size(params_, limits, expect_sparse_);
  std::reverse(a.buckets.begin(), a.buckets.end());
  reducer_ = Reducer::create(params_, param_names_, a.buckets, options_.process_group, expect_sparse_, ro);
}

void DistributedDataParallel::collect_parameters() {
  std::set<std::string> ignored;
  for (const auto& n : options_.params_and_buffers_to_ignore) ignored.insert(normalise(n));
  // The delayed parameters leave the Reducer (PyTorch adds their names to parameters_to_ignore); they are
  // matched by identity, so that a name spelled differently cannot put one parameter in both places.
  std::map<const TensorImpl*, std::string> delayed;
  for (const auto& [name, p] : options_.delay_all_reduce_named_params) {
    BRAID_CHECK_ARG(p.defined(), "delay_all_reduce_named_params: {} is an undefined tensor", name);
    BRAID_CHECK_ARG(delayed.emplace(p.unsafe_impl(), normalise(name)).second,
                    "delay_all_reduce_named_params: {} is listed twice", name);
  }
  std::vector<Tensor> delayed_params;
  std::vector<std::string> delayed_names;

  // Parameters module by module (own ones only), shared ones once, as PyTorch's _build_params_for_reducer.
  std::set<const TensorImpl*> seen;
  for (auto& [prefix, m] : module_->named_modules()) {
    const auto* bag = dynamic_cast<const nn::EmbeddingBag*>(m);
    for (const auto& [local, p] : m->named_parameters(/*recurse=*/false)) {
      const std::string name = prefix.empty() ? local : prefix + "." + local;
      if (!seen.insert(p.unsafe_impl()).second) continue;
      if (const auto d = delayed.find(p.unsafe_impl()); d != delayed.end()) {
        BRAID_CHECK_ARG(bag == nullptr || !bag->sparse(), "delay_all_reduce_named_params: {} has sparse gradients; "
                        "only dense parameters can be delayed", d->second);
        delayed_params.push_back(p);
        delayed_names.push_back(d->second);
        delayed.erase(d);
        continue;
      }
      if (!autograd::requires_grad(p) || ignored.count(name)) continue;
      params_.push_back(p);
      param_names_.push_back(name);
      expect_sparse_.push_back(bag != nullptr && bag->sparse());
    }
  }
  BRAID_CHECK_ARG(delayed.empty(), "delay_all_reduce_named_params: {} is not a parameter of the module",
                  delayed.empty() ? std::string() : delayed.begin()->second);
  BRAID_CHECK_ARG(!params_.empty() || !delayed_params.empty(), "DistributedDataParallel is not needed when a module "
                  "doesn't have any parameter that requires a gradient.");
  for (const auto& p : params_) {
    BRAID_CHECK_ARG(p.device().type == params_.front().device().type,
                    "DistributedDataParallel's input module must be on the same type of devices (found {} and {})",
                    params_.front().device().str(), p.device().str());
  }
  if (!delayed_params.empty()) {
    delayed_ = DelayedAllreduce::create(std::move(delayed_params), std::move(delayed_names), options_.process_group);
  }
  if (const Tensor& hook = options_.param_to_hook_all_reduce; hook.defined()) {
    BRAID_CHECK_ARG(delayed_ != nullptr, "param_to_hook_all_reduce is set but delay_all_reduce_named_params is empty: "
                    "it says when the delayed parameters' allreduce starts, so both are needed");
    std::string hook_name;
    for (const auto& [name, p] : module_->named_parameters()) {
      if (p.unsafe_impl() == hook.unsafe_impl()) hook_name = name;
    }
    BRAID_CHECK_ARG(!hook_name.empty(), "param_to_hook_all_reduce ({}) is not a parameter of the module",
                    hook.describe());
    BRAID_CHECK_ARG(autograd::requires_grad(hook), "param_to_hook_all_reduce ({}) must require grad", hook_name);
    delayed_->launch_after(hook, hook_name);
  }
}

Reducer& DistributedDataParallel::reducer() const {
  BRAID_CHECK_ARG(reducer_ != nullptr, "DistributedDataParallel: no Reducer, since every parameter that requires "
                  "grad is in delay_all_reduce_named_params or params_and_buffers_to_ignore");
  return *reducer_;
}

DistributedDataParallel::~DistributedDataParallel() {
  // A forward never followed by its backward leaves the parameters in low precision.
  if (param_precision_) param_precision_->restore();
}

void DistributedDataParallel::verify_params_across_processes(const std::vector<Tensor>& params,
                                                             const std::vector<std::string>& names) {
  auto& pg = *options_.process_group;
  const std::vector<int64_t> mine = describe_params(params);
  // Lengths first (ranks with other models describe more or fewer numbers), then the padded descriptions.
  const Device dev = control_device(pg, params.front());
  Tensor len = from_vector<int64_t>({static_cast<int64_t>(mine.size())}, {1}).to(dev);
  std::vector<collectives::TensorList> lens(1);
  for (int r = 0; r < pg.size(); ++r) lens[0].push_back(zeros({1}, TensorOptions(DType::Int64, dev)));
  collectives::TensorList in{len};
  pg.allgather(lens, in)->wait();
  int64_t longest = 0;
  for (const auto& t : lens[0]) longest = std::max(longest, t.cpu().data<int64_t>()[0]);
  std::vector<int64_t> padded = mine;
  padded.resize(static_cast<size_t>(longest), -1);
  std::vector<collectives::TensorList> all(1);
  for (int r = 0; r < pg.size(); ++r) all[0].push_back(zeros({longest}, TensorOptions(DType::Int64, dev)));
  collectives::TensorList desc{from_vector(padded, {longest}).to(dev)};
  pg.allgather(all, desc)->wait();
  for (auto& t : all[0]) t = t.cpu();
  // Every rank compares every rank with rank 0, so that all of them fail together (a rank that went on
  // alone would wait in the next collective).
  const std::vector<int64_t> reference(all[0][0].data<int64_t>(), all[0][0].data<int64_t>() + longest);
  const auto describe_at = [](const std::vector<int64_t>& d, size_t at) {
    const auto dtype = d[at];
    Shape shape(d.begin() + static_cast<std::ptrdiff_t>(at) + 2,
                d.begin() + static_cast<std::ptrdiff_t>(at) + 2 + d[at + 1]);
    const std::string name =
        dtype >= 0 && dtype < static_cast<int64_t>(kDTypeCount) ? std::string(dtype_name(static_cast<DType>(dtype))) : "?";
    return name + " " + shape_str(shape);
  };
  for (int r = 1; r < pg.size(); ++r) {
    const std::vector<int64_t> other(all[0][static_cast<size_t>(r)].data<int64_t>(),
                                     all[0][static_cast<size_t>(r)].data<int64_t>() + longest);
    if (other[0] != reference[0]) {
      BRAID_THROW(InvalidArgument,
                  "DDP expects same model across all ranks, but Rank {} has {} params, while rank 0 has inconsistent "
                  "{} params.", r, other[0], reference[0]);
    }
    size_t at = 1;
    for (size_t i = 0; i < params.size(); ++i) {
      const size_t span = 2 + static_cast<size_t>(reference[at + 1]);
      if (!std::equal(reference.begin() + static_cast<std::ptrdiff_t>(at),
                      reference.begin() + static_cast<std::ptrdiff_t>(at + span),
                      other.begin() + static_cast<std::ptrdiff_t>(at))) {
        BRAID_THROW(InvalidArgument,
                    "DDP: {} (parameter {}) on rank {} is {} and appears not to match sizes of the same param in "
                    "process 0 ({})", names[i], i, r, describe_at(other, at), describe_at(reference, at));
      }
      at += span;
    }
  }
}

std::vector<Tensor> DistributedDataParallel::synced_buffers() const {
  std::vector<Tensor> out;
  for (const auto& [name, b] : named_synced_buffers()) out.push_back(b);
  return out;
}

std::map<std::string, Tensor> DistributedDataParallel::named_synced_buffers() const {
  std::set<std::string> ignored;
  for (const auto& n : options_.params_and_buffers_to_ignore) ignored.insert(normalise(n));
  std::map<std::string, Tensor> out;
  for (const auto& [name, b] : module_->named_buffers()) {
    if (!ignored.count(name)) out.emplace(name, b);
  }
  return out;
}

bool DistributedDataParallel::will_sync_module_buffers() const {
  return options_.broadcast_buffers && require_backward_grad_sync_ && !named_synced_buffers().empty();
}

void DistributedDataParallel::sync_buffers() {
  if (!buffer_hook_) return sync_module_states(/*params=*/false, /*buffers=*/true);
  std::vector<Future<Tensor>> futures = buffer_hook_(named_synced_buffers());
  if (!futures.empty()) reducer_->install_post_backward_futures(std::move(futures));
}

void DistributedDataParallel::register_buffer_comm_hook(BufferCommHook hook, BufferCommHookLocation location) {
  BRAID_CHECK_ARG(static_cast<bool>(hook), "DistributedDataParallel::register_buffer_comm_hook: the hook is empty");
  BRAID_CHECK_ARG(!join_enabled_, "DistributedDataParallel::register_buffer_comm_hook: not supported while a Join "
                  "is active (rank {})", options_.process_group->rank());
  buffer_hook_ = std::move(hook);
  buffer_hook_location_ = location;
}

void DistributedDataParallel::sync_module_states(bool params, bool buffers, int root) {
  std::vector<Tensor> tensors;
  if (params) {
    tensors = params_;
    if (delayed_) tensors.insert(tensors.end(), delayed_->params().begin(), delayed_->params().end());
  }
  if (buffers) {
    for (auto& b : synced_buffers()) tensors.push_back(b);
  }
  if (tensors.empty()) return;
  // One broadcast per dtype and device of everything flattened (PyTorch coalesces the same way).
  std::map<std::tuple<int, int, int>, std::vector<Tensor>> groups;
  for (const auto& t : tensors) {
    groups[{static_cast<int>(t.dtype()), static_cast<int>(t.device().type), t.device().index}].push_back(t);
  }
  autograd::NoGradGuard no_grad;
  for (auto& [key, group] : groups) {
    int64_t numel = 0;
    for (const auto& t : group) numel += t.numel();
    Tensor flat = empty({numel}, TensorOptions(group.front().dtype(), group.front().device()));
    int64_t off = 0;
    for (const auto& t : group) {
      flat.slice(0, off, off + t.numel()).view(t.shape()).copy_(t);
      off += t.numel();
    }
    collectives::TensorList list{flat};
    collectives::BroadcastOptions bo;
    bo.root_rank = root;
    options_.process_group->broadcast(list, bo)->wait();
    off = 0;
    for (const auto& t : group) {
      t.copy_(flat.slice(0, off, off + t.numel()).view(t.shape()));
      off += t.numel();
    }
  }
}

void DistributedDataParallel::register_comm_hook(NamedCommHook hook) { reducer().register_comm_hook(std::move(hook)); }

void DistributedDataParallel::before_forward() {
  if (delayed_) delayed_->prepare_grads();
  if (!reducer_) return;  // PyTorch runs the bare module then
  if (join_enabled_) {
    join_forward_prologue(/*active=*/true);
  } else if (will_sync_module_buffers() &&
             (!buffer_hook_ || buffer_hook_location_ == BufferCommHookLocation::kPreForward)) {
    // Buffers are re-collected each time: user code may have replaced one.
    sync_buffers();
  }
  reducer_->prepare_for_forward();
  if (param_precision_) param_precision_->to_low_precision();
}

TensorList DistributedDataParallel::after_forward(TensorList outputs) {
  // Under a Join every rank must call the hook in the same iterations, joined ones included: the Join's
  // agreed verdict decides, not this rank's own no_sync state.
  const bool buffers = join_enabled_ ? join_buffer_sync_ : will_sync_module_buffers();
  if (reducer_ && buffer_hook_ && buffer_hook_location_ == BufferCommHookLocation::kPostForward && buffers) {
    sync_buffers();
  }
  const bool sync = autograd::GradMode::is_enabled() && require_backward_grad_sync_;
  // The sink goes first: the Reducer's unused-parameter search then walks through it.
  if (delayed_ && sync) outputs = delayed_->attach_sink(outputs);
  if (reducer_ && sync) reducer_->prepare_for_backward(outputs);
  if (param_precision_) {
    // No backward will come to restore the parameters (evaluation, no_grad): restore them now.
    const bool backward_follows = autograd::GradMode::is_enabled() &&
                                  std::any_of(outputs.begin(), outputs.end(), [](const Tensor& t) {
                                    return t.defined() && autograd::requires_grad(t);
                                  });
    if (!backward_follows) param_precision_->restore();
  }
  return outputs;
}

TensorList DistributedDataParallel::cast_inputs(const TensorList& inputs) const {
  if (!param_precision_) return inputs;
  // PyTorch casts floating forward inputs to param_dtype too (differentiably: gradients flow back upcast).
  TensorList cast = inputs;
  for (auto& t : cast) {
    if (t.defined() && is_floating(t.dtype()) && !t.is_sparse() && t.dtype() != param_precision_->dtype()) {
      t = autograd::to(t, param_precision_->dtype());
    }
  }
  return cast;
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  return forward_many({input}).at(0);
}

TensorList DistributedDataParallel::forward_many(const TensorList& inputs) {
  before_forward();
  TensorList out;
  try {
    out = module_->forward_many(cast_inputs(inputs));
  } catch (...) {
    if (param_precision_) param_precision_->restore();  // no backward will follow a failed forward
    throw;
  }
  return after_forward(std::move(out));
}

}  // namespace braid::parallel
