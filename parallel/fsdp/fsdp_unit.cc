#include "parallel/fsdp/fsdp_unit.h"

#include <fmt/format.h>

#include "autograd/checkpoint.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/shape.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "base/error.h"
#include "base/logging.h"
#include "parallel/fsdp/post_backward_node.h"
#include "parallel/fsdp/saved_use_counter.h"
#include "parallel/fsdp/unit_registry.h"
#include "tensor/factory.h"

namespace braid::parallel::fsdp {

namespace {

std::vector<std::pair<std::string, Shape>> shapes_of(const std::vector<std::pair<std::string, Tensor>>& params) {
  std::vector<std::pair<std::string, Shape>> out;
  out.reserve(params.size());
  for (const auto& [name, p] : params) out.emplace_back(name, p.shape());
  return out;
}

int group_size_or_throw(const std::shared_ptr<collectives::ProcessGroup>& group, const std::string& unit) {
  BRAID_CHECK_ARG(group != nullptr, "fully_shard({}): the process group is null (a rank outside a group made with "
                                    "use_local_synchronization gets null; only the group's members may shard on it)",
                  unit);
  return group->size();
}

// Waits for every collective issued for one unit step; names the unit when one fails.
void wait_all(const std::vector<std::shared_ptr<collectives::Work>>& works, const std::string& what) {
  for (const auto& w : works) {
    try {
      w->wait();
    } catch (const Error& e) {
      BRAID_THROW(CommError, "{}: {}", what, e.what());
    }
  }
}

// A new tensor with t's values in `dtype` (never a view of t).
Tensor fresh_copy(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t.clone() : t.to(dtype); }

}  // namespace

std::string to_string(ShardingStrategy s) {
  switch (s) {
    case ShardingStrategy::FULL_SHARD: return "FULL_SHARD";
    case ShardingStrategy::SHARD_GRAD_OP: return "SHARD_GRAD_OP";
    case ShardingStrategy::NO_SHARD: return "NO_SHARD";
    case ShardingStrategy::HYBRID_SHARD: return "HYBRID_SHARD";
  }
  return "?";
}

FSDPUnit::FSDPUnit(nn::Module& module, std::string name, std::vector<std::pair<std::string, Tensor>> params,
                   std::shared_ptr<collectives::ProcessGroup> group, FSDPOptions options)
    : module_(module),
      name_(std::move(name)),
      params_(std::move(params)),
      group_(std::move(group)),
      options_(options),
      layout_(shapes_of(params_), group_size_or_throw(group_, name_)),
      rank_(group_->rank()),
      world_(group_->size()) {
  if (!params_.empty()) {
    dtype_ = params_.front().second.dtype();
    device_ = params_.front().second.device();
  }
  BRAID_CHECK_ARG(!options_.offload_params || is_sharded(),
                  "fully_shard({}): offload_params needs a sharded strategy, not NO_SHARD (the full parameters "
                  "would have to travel to the device for every forward)", name_);
  shard_device_ = options_.offload_params ? Device::cpu() : device_;
  const auto& mp = options_.mixed_precision;
  param_dtype_ = mp.param_dtype.value_or(dtype_);
  reduce_dtype_ = mp.reduce_dtype.value_or(param_dtype_);
  BRAID_CHECK_ARG(is_sharded() || param_dtype_ == dtype_,
                  "fully_shard({}): mixed_precision.param_dtype ({}) needs a sharded strategy, not NO_SHARD", name_,
                  dtype_name(param_dtype_));
  for (auto d : {param_dtype_, reduce_dtype_}) {
    BRAID_CHECK_ARG(is_floating(d), "fully_shard({}): mixed precision dtypes must be floating, got {}", name_,
                    dtype_name(d));
  }
  const bool hybrid = options_.strategy == ShardingStrategy::HYBRID_SHARD;
  BRAID_CHECK_ARG(hybrid == (options_.replicate_group != nullptr),
                  "fully_shard({}): {}", name_,
                  hybrid ? "HYBRID_SHARD needs options.replicate_group (the ranks holding the same shard)"
                         : "options.replicate_group is only for HYBRID_SHARD");
  for (const auto& [pname, p] : params_) {
    const auto& [first_name, first] = params_.front();
    BRAID_CHECK_ARG(p.dtype() == dtype_ && p.device() == device_,
                    "fully_shard({}): all parameters of one unit must share a dtype and a device, but '{}' is {} and "
                    "'{}' is {}; wrap them in separate units",
                    name_, first_name, first.describe(), pname, p.describe());
    BRAID_CHECK_ARG(!p.is_sparse(), "fully_shard({}): parameter '{}' is sparse; FSDP shards dense parameters only",
                    name_, pname);
  }
}

FSDPUnit::~FSDPUnit() {
  // A prefetched all-gather still writes into this unit's buffers: let it finish before they go.
  for (const auto& w : pending_gathers_) {
    try {
      w->wait();
    } catch (const std::exception&) {  // the group is poisoned and says so on its next use
    }
  }
  detail::unregister_unit(this);
}

std::string FSDPUnit::describe() const {
  return fmt::format("fsdp unit '{}' ({}, rank {}/{} of group '{}')", name_, to_string(options_.strategy), rank_,
                     world_, group_->name());
}

void FSDPUnit::shard_parameters() {
  if (!is_sharded()) return;
  autograd::NoGradGuard no_grad;
  shards_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    const Tensor rows = layout_.shard_of(p, i, rank_);
    const Tensor shard = shard_device_ == device_ ? rows.clone() : rows.to(shard_device_);
    p.set_data(shard);
    // A full-size gradient would no longer match the parameter: drop it (fully_shard starts a fresh step).
    autograd::set_grad(p, Tensor());
    shards_[i] = shard;
  }
}

void FSDPUnit::unshard() {
  start_unshard();
  finish_unshard();
}

void FSDPUnit::start_unshard() {
  if (unsharded_ || unshard_pending_ || !is_sharded() || params_.empty()) return;
  autograd::NoGradGuard no_grad;
  if (!unsharded_storage_) {
    unsharded_storage_.emplace(layout_.unsharded_numel(), param_dtype_, device_);
    std::weak_ptr<FSDPUnit> weak = weak_from_this();
    saved_uses_ = std::make_shared<SavedUseCounter>(unsharded_storage_->flat().storage().get(), [weak] {
      if (auto unit = weak.lock()) unit->saved_uses_gone();
    });
  }
  // Per gather, like every communication buffer here: kept per unit they would add up to 1/N of the model
  // again; taken when needed, units of one size share the allocator's cached block (no page faults).
  gather_input_ = empty({layout_.block_numel()}, TensorOptions(param_dtype_, device_));
  unsharded_storage_->will_fill();
  std::vector<std::shared_ptr<collectives::Work>>& works = pending_gathers_;
  works.clear();
  works.reserve(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [pname, p] = params_[i];
    const ParamShardSpec& spec = layout_.param(i);
    BRAID_CHECK_ARG(p.shape() == spec.shard_shape(rank_) && p.dtype() == dtype_,
                    "{}: parameter '{}' is {} but its shard should be {} [{}] rows {}..{}; was it replaced while "
                    "sharded?",
                    describe(), pname, p.describe(), dtype_name(dtype_), fmt::join(spec.shard_shape(rank_), ", "),
                    spec.shard_start_row(rank_), spec.shard_start_row(rank_) + spec.shard_rows(rank_));
    // The handle's current data is the shard (the optimizer may have replaced or updated it).
    shards_[i] = p.alias();
    Tensor segment = layout_.block_segment(gather_input_, i);
    const int64_t rows = spec.shard_rows(rank_);
    if (rows > 0) segment.narrow(0, 0, rows).copy_(p);
    if (rows < spec.rows_per_rank) segment.narrow(0, rows, spec.rows_per_rank - rows).zero_();
    Tensor in = gather_input_.narrow(0, spec.block_offset, spec.padded_shard_numel());
    Tensor out = layout_.padded_full_segment(unsharded_storage_->flat(), i);
    // One all-gather per parameter, straight into its place: no copy-out, and the collectives leave the
    // storage's version alone, so tensors saved in forward stay valid when backward gathers again.
    works.push_back(group_->allgather_into_tensor(out, in));
  }
  unshard_pending_ = true;
}

void FSDPUnit::finish_unshard() {
  if (!unshard_pending_) return;
  unshard_pending_ = false;
  std::vector<std::shared_ptr<collectives::Work>> works = std::move(pending_gathers_);
  pending_gathers_.clear();
  wait_all(works, describe() + ": all-gather of the parameters");
  gather_input_ = Tensor();
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i].second.set_data(layout_.full_view(unsharded_storage_->flat(), i));
  }
  unsharded_ = true;
}

void FSDPUnit::reshard() {
  finish_unshard();  // a prefetched all-gather still writes into the storage: let it land first
  if (!unsharded_) return;
  for (size_t i = 0; i < params_.size(); ++i) params_[i].second.set_data(shards_[i]);
  unsharded_storage_->release();
  unsharded_ = false;
}

void FSDPUnit::write_back_shards() {
  if (!unsharded_) return;
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) shards_[i].copy_(layout_.shard_of(params_[i].second, i, rank_));
}

void FSDPUnit::detach_from_node() {
  if (!node_attached_) return;
  for (const auto& [pname, p] : params_) {
    auto* m = autograd::meta(p);
    if (m != nullptr && m->grad_fn) {
      m->grad_fn = nullptr;
      m->output_nr = 0;
    }
  }
  node_attached_ = false;
}

void FSDPUnit::pre_forward(TensorList& inputs) {
  detach_from_node();  // a forward that threw may have left the previous node attached
  unshard();
  // A forward that activation checkpointing runs again inside backward is no step of the recorded order:
  // neither record it nor prefetch the unit that followed it in the real forward (its backward is over).
  const bool recomputing = autograd::in_checkpoint_recompute();
  if (!recomputing) in_backward_ = false;
  in_forward_ = true;
  // Count what this forward saves of the gathered parameters (see saved_uses_gone).
  if (saved_uses_) autograd::add_saved_tensor_observer(saved_uses_);
  if ((options_.forward_prefetch || options_.backward_prefetch) && !recomputing) record_and_prefetch();
  const auto& mp = options_.mixed_precision;
  if (mp.param_dtype && mp.cast_forward_inputs) {
    for (Tensor& x : inputs) {
      if (x.defined() && is_floating(x.dtype()) && x.dtype() != param_dtype_) x = autograd::to(x, param_dtype_);
    }
  }
  if (!autograd::GradMode::is_enabled()) return;
  std::vector<autograd::Edge> edges(params_.size());
  bool any = false;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (autograd::requires_grad(params_[i].second)) {
      edges[i] = autograd::gradient_edge(params_[i].second);
      any = true;
    }
  }
  if (!any) return;
  auto node = std::make_shared<PostBackwardNode>(weak_from_this(), std::move(edges));
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    if (!autograd::requires_grad(p)) continue;
    auto* m = autograd::meta(p);
    m->grad_fn = node;
    m->output_nr = static_cast<uint32_t>(i);
  }
  node_attached_ = true;
}

void FSDPUnit::post_forward(TensorList& outputs) {
  in_forward_ = false;
  if (saved_uses_) autograd::remove_saved_tensor_observer(saved_uses_.get());
  const bool recorded = node_attached_;
  detach_from_node();
  if (is_root_forward_) finish_recording();
  if (const auto out_dtype = options_.mixed_precision.output_dtype) {
    for (Tensor& out : outputs) {
      if (out.defined() && is_floating(out.dtype()) && out.dtype() != *out_dtype) out = autograd::to(out, *out_dtype);
    }
  }
  if (recorded) {
    std::weak_ptr<FSDPUnit> weak = weak_from_this();
    for (const Tensor& out : outputs) {
      if (!out.defined() || !autograd::requires_grad(out)) continue;
      autograd::register_hook(out, [weak](const Tensor&) {
        if (auto unit = weak.lock()) unit->pre_backward();
        return Tensor();
      });
    }
  }
  // Without a backward to come (no grad, or nothing recorded) nobody else would reshard. After a forward
  // recomputed by activation checkpointing the unit's backward follows at once: keep the parameters
  // gathered for it instead of gathering them again (FSDP2 does the same).
  const bool backward_follows = recorded && autograd::in_checkpoint_recompute();
  if ((options_.resolved_reshard_after_forward() && !backward_follows) || !recorded) reshard();
}

namespace {
// The unit whose forward is the outermost one running on this thread (forward_prefetch's root). Weak: a
// forward that threw never reaches its root's post-forward, and the root may be gone by the next one.
thread_local std::weak_ptr<FSDPUnit> t_forward_root;
}  // namespace

void FSDPUnit::record_and_prefetch() {
  auto root = t_forward_root.lock();
  if (root == nullptr) {
    root = shared_from_this();
    t_forward_root = root;
    is_root_forward_ = true;
    if (!order_recorded_) forward_order_.clear();
  }
  if (!root->order_recorded_) root->forward_order_.push_back(weak_from_this());
  if (!options_.forward_prefetch) return;
  if (auto next = next_forward_.lock()) next->start_unshard();
}

void FSDPUnit::finish_recording() {
  t_forward_root.reset();
  is_root_forward_ = false;
  if (order_recorded_) return;
  for (size_t k = 0; k + 1 < forward_order_.size(); ++k) {
    auto unit = forward_order_[k].lock();
    auto next = forward_order_[k + 1].lock();
    if (unit && next && unit != next) {
      unit->next_forward_ = next;
      next->previous_forward_ = unit;
    }
  }
  forward_order_.clear();
  order_recorded_ = true;
}

bool FSDPUnit::needs_params_in_backward() const { return saved_uses_ == nullptr || saved_uses_->live() > 0; }

void FSDPUnit::pre_backward() {
  in_backward_ = true;
  // Backward reads the gathered parameters only through what forward saved of them. Nothing saved (a
  // first layer: its input needs no gradient, so its weight is not saved): no all-gather at all, and
  // SHARD_GRAD_OP's parameters kept from forward go back now.
  if (needs_params_in_backward()) {
    unshard();
  } else {
    reshard();
  }
  if (!options_.backward_prefetch) return;
  auto previous = previous_forward_.lock();
  if (previous && previous->needs_params_in_backward()) previous->start_unshard();
}

void FSDPUnit::saved_uses_gone() noexcept {
  // The last saved alias of the gathered parameters was dropped during backward: no op left in the graph
  // reads them, so they go back now, before the gradients (as large as they) reach this unit's node.
  // Not inside a forward: a forward that activation checkpointing recomputes still needs them. Not with
  // an all-gather in flight, whose wait could fail here, inside a token's destructor.
  if (!in_backward_ || in_forward_ || !is_sharded() || unshard_pending_) return;
  try {
    reshard();
  } catch (const std::exception& e) {
    logging::get("braid.fsdp")->warn("{}: giving the gathered parameters back early failed ({}); the unit's "
                                     "reduction reshards instead", describe(), e.what());
  }
}

TensorList FSDPUnit::post_backward(const TensorList& full_grads) {
  BRAID_ASSERT(full_grads.size() == params_.size(), "{}: {} gradients for {} parameters", describe(),
               full_grads.size(), params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& g = full_grads[i];
    BRAID_CHECK_ARG(!g.defined() || g.shape() == layout_.param(i).full_shape,
                    "{}: gradient of '{}' is {}, expected the full shape", describe(), params_[i].first, g.describe());
  }
  autograd::NoGradGuard no_grad;
  TensorList out(params_.size());
  if (is_sharded()) {
    // Every op that used the gathered parameters has run its backward (the engine runs this node only
    // after all of them): give the gathered memory back before the unit-sized reduce-scatter input is
    // taken, so the two never coexist.
    reshard();
    reduce_scatter_grads(full_grads, out);
  } else {
    allreduce_grads(full_grads, out);
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!autograd::requires_grad(params_[i].second)) out[i] = Tensor();
  }
  return out;
}

namespace {
// Parameters whose full gradient is at least this large are reduce-scattered straight from it when its
// layout allows; smaller ones share one packed collective (one call per tiny bias would cost more than
// the copy).
constexpr int64_t kDirectReduceScatterBytes = 1 << 20;
}  // namespace

bool FSDPUnit::reduces_in_place(size_t i, const Tensor& grad) const {
  // Rank r's rows of an unpadded gradient are its r-th contiguous slice: exactly a reduce-scatter input.
  const ParamShardSpec& spec = layout_.param(i);
  return grad.defined() && grad.dtype() == reduce_dtype_ && grad.device() == device_ && grad.is_contiguous() &&
         spec.rows_per_rank * world_ == spec.rows &&
         grad.numel() * static_cast<int64_t>(element_size(reduce_dtype_)) >= kDirectReduceScatterBytes;
}

void FSDPUnit::reduce_scatter_grads(const TensorList& full_grads, TensorList& out) {
  // Each parameter's shard gradient is a tensor of its own, so AccumulateGrad can keep it as .grad
  // without a copy. Large unpadded gradients are reduce-scattered straight into theirs; the others share
  // one packed collective.
  TensorList shard_grads(params_.size());
  std::vector<std::shared_ptr<collectives::Work>> works;
  const collectives::ReduceScatterOptions plain;
  collectives::ReduceScatterOptions scratch;
  scratch.input_is_scratch = true;
  std::vector<size_t> packed;
  int64_t packed_block = 0;
  TensorList reduced;  // the distinct reduced buffers: each directly reduced shard, and the packed block
  for (size_t i = 0; i < params_.size(); ++i) {
    if (reduces_in_place(i, full_grads[i])) {
      const Tensor& g = full_grads[i];
      // A gradient only this node holds dies with it: the engine may reduce in it instead of a copy. One
      // shared with another node (AddBackward hands the same tensor to both inputs) must stay intact.
      const bool sole_owner = g.use_count() == 1 && g.storage().use_count() == 1;
      shard_grads[i] = empty(layout_.param(i).shard_shape(rank_), TensorOptions(reduce_dtype_, device_));
      Tensor shard = shard_grads[i].view({-1});
      Tensor full = g.view({-1});
      works.push_back(group_->reduce_scatter_tensor(shard, full, sole_owner ? scratch : plain));
      reduced.push_back(shard_grads[i]);
    } else {
      packed.push_back(i);
      packed_block += layout_.param(i).padded_shard_numel();
    }
  }
  Tensor packed_output;
  if (!packed.empty()) {
    // World blocks, rank-major; zeroed, because padding and unused parameters must contribute nothing.
    Tensor packed_input = zeros({packed_block * world_}, TensorOptions(reduce_dtype_, device_));
    packed_output = empty({packed_block}, TensorOptions(reduce_dtype_, device_));
    int64_t offset = 0;
    for (size_t i : packed) {
      const ParamShardSpec& spec = layout_.param(i);
      for (int r = 0; r < world_ && full_grads[i].defined(); ++r) {
        const int64_t rows = spec.shard_rows(r);
        if (rows == 0) continue;
        packed_input.narrow(0, r * packed_block + offset, rows * spec.row_numel)
            .view(spec.shard_shape(r))
            .copy_(layout_.shard_of(full_grads[i], i, r));
      }
      shard_grads[i] = packed_output.narrow(0, offset, spec.shard_rows(rank_) * spec.row_numel)
                           .view(spec.shard_shape(rank_));
      offset += spec.padded_shard_numel();
    }
    works.push_back(group_->reduce_scatter_tensor(packed_output, packed_input, scratch));
  }
  wait_all(works, describe() + ": reduce-scatter of the gradients");
  if (packed_output.defined()) reduced.push_back(packed_output);
  int replicas = 1;
  if (const auto& replicate = options_.replicate_group) {
    // HYBRID_SHARD: every replica of this shard adds its part.
    replicas = replicate->size();
    std::vector<std::shared_ptr<collectives::Work>> sums;
    for (Tensor& t : reduced) {
      TensorList list{t};
      sums.push_back(replicate->allreduce(list));
    }
    wait_all(sums, describe() + ": allreduce of the gradient shards across replicas");
  }
  const Scalar average(1.0 / (static_cast<double>(world_) * replicas));
  for (const Tensor& t : reduced) t.mul_(average);
  for (size_t i = 0; i < params_.size(); ++i) {
    // Another dtype (mixed precision) or offload_params makes copies where the shard is.
    const Tensor& g = shard_grads[i];
    if (shard_device_ != device_) {
      out[i] = g.to(dtype_).to(shard_device_);
    } else {
      out[i] = g.dtype() == dtype_ ? g : g.to(dtype_);
    }
  }
}

void FSDPUnit::allreduce_grads(const TensorList& full_grads, TensorList& out) {
  int64_t total = 0;
  for (const auto& [pname, p] : params_) total += p.numel();
  if (!allreduce_buffer_.defined()) allreduce_buffer_ = empty({total}, TensorOptions(reduce_dtype_, device_));
  int64_t offset = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Shape& shape = layout_.param(i).full_shape;
    Tensor dst = allreduce_buffer_.narrow(0, offset, params_[i].second.numel()).view(shape);
    if (full_grads[i].defined()) {
      dst.copy_(full_grads[i]);
    } else {
      dst.zero_();
    }
    offset += params_[i].second.numel();
  }
  TensorList list{allreduce_buffer_};
  wait_all({group_->allreduce(list)}, describe() + ": allreduce of the gradients");
  allreduce_buffer_.mul_(Scalar(1.0 / world_));
  offset = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t n = params_[i].second.numel();
    out[i] = fresh_copy(allreduce_buffer_.narrow(0, offset, n).view(layout_.param(i).full_shape), dtype_);
    offset += n;
  }
}

}  // namespace braid::parallel::fsdp
