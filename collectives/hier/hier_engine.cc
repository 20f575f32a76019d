#include "collectives/hier/hier_engine.h"

#include <fmt/format.h>

#include "base/check.h"
#include "base/copy_bytes.h"
#include "collectives/queue/flat_buffers.h"

namespace braid::collectives::hier {

namespace {

// Moves `count` elements between flat (1-D, contiguous) buffers as raw memory, as every engine writes its
// outputs: Tensor::copy_ would bump the output storage's version counter, and a collective must not (FSDP
// gathers a parameter again into storage that autograd saved for backward). In pieces, as the engines copy
// (base/copy_bytes.h says why).
void copy_block(const Tensor& dst, int64_t dst_offset, const Tensor& src, int64_t src_offset, int64_t count) {
  const size_t esize = dst.element_size();
  copy_bytes(static_cast<char*>(dst.data_ptr()) + static_cast<size_t>(dst_offset) * esize,
             static_cast<const char*>(src.data_ptr()) + static_cast<size_t>(src_offset) * esize,
             static_cast<size_t>(count) * esize);
}

// Scratch buffers up to this size stay with their lane for its later ops; larger ones are made per op, so
// that a rare huge allgather does not keep its copy for the group's lifetime.
constexpr size_t kKeptScratchBytes = size_t{64} << 20;

}  // namespace

HierEngine::HierEngine(GroupShape shape, int lanes, Parts parts)
    : shape_(std::move(shape)),
      lanes_(lanes),
      layout_(std::move(parts.layout)),
      host_(layout_.host_of.at(static_cast<size_t>(shape_.rank))),
      local_rank_(layout_.local_rank_of.at(static_cast<size_t>(shape_.rank))),
      local_size_(layout_.local_size(host_)),
      uniform_(layout_.uniform()),
      local_network_(std::move(parts.local_network)),
      local_shm_(std::move(parts.local_shm)),
      cross_(std::move(parts.cross)),
      scratch_(static_cast<size_t>(lanes), std::vector<Tensor>(2)) {
  BRAID_CHECK_ARG(layout_.size() == shape_.size, "group '{}': a host layout of {} ranks for a group of {}",
                  shape_.name, layout_.size(), shape_.size);
  BRAID_CHECK_ARG((local_size_ > 1) == (local_network_ != nullptr),
                  "group '{}' (rank {}): host {} has {} ranks, but the local network engine is {}", shape_.name,
                  shape_.rank, host_, local_size_, local_network_ ? "there" : "missing");
  const bool has_peers = layout_.ranks_with_local_rank(local_rank_).size() > 1;
  BRAID_CHECK_ARG(has_peers == (cross_ != nullptr), "group '{}' (rank {}): local rank {} {} on other hosts, but "
                  "the cross-host engine is {}", shape_.name, shape_.rank, local_rank_,
                  has_peers ? "has peers" : "has none", cross_ ? "there" : "missing");
  for (const Engine* e : {local_network_.get(), local_shm_.get(), cross_.get()}) {
    BRAID_CHECK_ARG(e == nullptr || e->lanes() == lanes_, "group '{}': the two-level engine's {} engine serves {} "
                    "lanes, the group {}", shape_.name, e->name(), e->lanes(), lanes_);
  }
  if (local_network_) {
    local_ = std::make_unique<EngineRouter>(*local_network_, local_shm_.get(), parts.local_policy);
    local_scatter_ = std::make_unique<EngineRouter>(*local_network_, local_shm_.get(), parts.local_scatter_policy);
  }
  const int hosts = layout_.host_count();
  for (int r = 0; r < shape_.size; ++r) {
    const auto u = static_cast<size_t>(r);
    if (r != layout_.local_rank_of[u] * hosts + layout_.host_of[u]) local_rank_major_ = false;
  }
}

HierEngine::~HierEngine() = default;

OpContext HierEngine::step(const OpContext& ctx, int step, const char* what) {
  OpContext s = ctx;
  s.seq = ctx.seq * 8 + static_cast<uint64_t>(step);
  s.what = fmt::format("{} [two levels: {}]", ctx.what, what);
  s.input_is_scratch = false;
  return s;
}

Tensor HierEngine::scratch(int lane, int slot, int64_t numel, DType dtype) {
  const size_t bytes = static_cast<size_t>(numel) * element_size(dtype);
  if (bytes > kKeptScratchBytes) return flat::flat_buffer(numel, dtype, Device::cpu());
  Tensor& t = scratch_.at(static_cast<size_t>(lane)).at(static_cast<size_t>(slot));
  if (!t.defined() || t.dtype() != dtype || t.numel() < numel) t = flat::flat_buffer(numel, dtype, Device::cpu());
  return t.narrow(0, 0, numel);
}

void HierEngine::allreduce_by_leaders(Tensor& buffer, EngineOp op, const OpContext& ctx, int first_step) {
  if (local_) local_->allreduce(buffer, op, step(ctx, first_step, "local allreduce"));
  if (local_rank_ == 0 && cross_) {
    (void)cross_->allreduce(buffer, op, step(ctx, first_step + 1, "cross-host allreduce of the local ranks 0"));
  }
  local_broadcast(buffer, 0, step(ctx, first_step + 2, "local broadcast"));
}

void HierEngine::local_broadcast(Tensor& buffer, int local_root, const OpContext& ctx) {
  if (local_) local_->broadcast(buffer, local_root, ctx);
}

bool HierEngine::allreduce(Tensor& buffer, EngineOp op, const OpContext& ctx) {
  const int64_t n = buffer.numel();
  if (!uniform_ || n < local_size_) {
    allreduce_by_leaders(buffer, op, ctx, 0);
    counts_[kAllreduceLeaders].fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  // Uniform, so local_size_ > 1 on every host (the layout has two levels) and every rank has both levels.
  Tensor flat = buffer.reshape({n});
  const int64_t per_rank = n / local_size_;
  Tensor head = flat.narrow(0, 0, per_rank * local_size_);
  Tensor slice = scratch(ctx.lane, 0, per_rank, buffer.dtype());
  // The allgather below overwrites the whole head, so the engine may use it as its scratch.
  OpContext scatter = step(ctx, 0, "local reduce_scatter");
  scatter.input_is_scratch = true;
  local_scatter_->reduce_scatter(head, slice, op, scatter);
  (void)cross_->allreduce(slice, op, step(ctx, 1, "cross-host allreduce of the slice"));
  local_->allgather(slice, head, step(ctx, 2, "local allgather"));
  if (per_rank * local_size_ < n) {
    Tensor tail = flat.narrow(0, per_rank * local_size_, n - per_rank * local_size_);
    allreduce_by_leaders(tail, op, ctx, 3);
  }
  counts_[kAllreduceSlices].fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool HierEngine::reduce_scatter(const Tensor& input, Tensor& output, EngineOp op, const OpContext& ctx) {
  if (!uniform_) return false;
  const int hosts = layout_.host_count();
  const int64_t block = output.numel();
  Tensor in = input.reshape({input.numel()});
  // Local rank i reduces, inside its host, the blocks of every host's local rank i: those blocks must lie
  // together, in host order.
  Tensor ordered = in;
  if (!local_rank_major_) {
    ordered = scratch(ctx.lane, 0, input.numel(), input.dtype());
    for (int i = 0; i < local_size_; ++i) {
      for (int h = 0; h < hosts; ++h) {
        const int owner = layout_.hosts[static_cast<size_t>(h)][static_cast<size_t>(i)];
        copy_block(ordered, (int64_t{i} * hosts + h) * block, in, owner * block, block);
      }
    }
  }
  Tensor mine = scratch(ctx.lane, 1, int64_t{hosts} * block, input.dtype());
  OpContext local = step(ctx, 0, "local reduce_scatter");
  local.input_is_scratch = !local_rank_major_ || ctx.input_is_scratch;
  local_scatter_->reduce_scatter(ordered, mine, op, local);
  OpContext cross = step(ctx, 1, "cross-host reduce_scatter");
  cross.input_is_scratch = true;
  (void)cross_->reduce_scatter(mine, output, op, cross);
  counts_[kReduceScatter].fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool HierEngine::allgather(const Tensor& input, Tensor& output, const OpContext& ctx) {
  if (!uniform_) return false;
  const int hosts = layout_.host_count();
  const int64_t block = input.numel();
  Tensor across = scratch(ctx.lane, 0, int64_t{hosts} * block, input.dtype());
  (void)cross_->allgather(input, across, step(ctx, 0, "cross-host allgather"));
  Tensor out = output.reshape({output.numel()});
  // The local allgather yields the blocks local-rank-major (local rank i's row holds every host's local
  // rank i); the group wants them in rank order.
  Tensor gathered = local_rank_major_ ? out : scratch(ctx.lane, 1, output.numel(), output.dtype());
  local_->allgather(across, gathered, step(ctx, 1, "local allgather"));
  if (!local_rank_major_) {
    for (int i = 0; i < local_size_; ++i) {
      for (int h = 0; h < hosts; ++h) {
        const int owner = layout_.hosts[static_cast<size_t>(h)][static_cast<size_t>(i)];
        copy_block(out, owner * block, gathered, (int64_t{i} * hosts + h) * block, block);
      }
    }
  }
  counts_[kAllgather].fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool HierEngine::broadcast(Tensor& buffer, int root, const OpContext& ctx) {
  const int root_host = layout_.host_of.at(static_cast<size_t>(root));
  const int root_local = layout_.local_rank_of.at(static_cast<size_t>(root));
  // The cross engines' ranks are the hosts in order, for every local rank that all hosts have.
  const bool every_host = static_cast<int>(layout_.ranks_with_local_rank(root_local).size()) == layout_.host_count();
  if (every_host) {
    if (local_rank_ == root_local) (void)cross_->broadcast(buffer, root_host, step(ctx, 0, "cross-host broadcast"));
    local_broadcast(buffer, root_local, step(ctx, 1, "local broadcast"));
  } else {
    if (host_ == root_host) local_broadcast(buffer, root_local, step(ctx, 0, "local broadcast on the root's host"));
    if (local_rank_ == 0 && cross_) {
      (void)cross_->broadcast(buffer, root_host, step(ctx, 1, "cross-host broadcast of the local ranks 0"));
    }
    if (host_ != root_host) local_broadcast(buffer, 0, step(ctx, 2, "local broadcast"));
  }
  counts_[kBroadcast].fetch_add(1, std::memory_order_relaxed);
  return true;
}

void HierEngine::post_send(const Tensor&, int, int, const Deadline&, std::shared_ptr<Work>) {
  BRAID_THROW(InternalError, "group '{}': the two-level engine has no point-to-point", shape_.name);
}

void HierEngine::post_recv(Tensor&, int, int, const Deadline&, std::shared_ptr<Work>) {
  BRAID_THROW(InternalError, "group '{}': the two-level engine has no point-to-point", shape_.name);
}

std::vector<std::pair<std::string, uint64_t>> HierEngine::counters() const {
  static constexpr const char* kNames[kCounters] = {"allreduce_slices", "allreduce_leaders", "reduce_scatter",
                                                     "allgather", "broadcast"};
  std::vector<std::pair<std::string, uint64_t>> out;
  for (int i = 0; i < kCounters; ++i) out.emplace_back(kNames[i], counts_[i].load(std::memory_order_relaxed));
  return out;
}

}  // namespace braid::collectives::hier
