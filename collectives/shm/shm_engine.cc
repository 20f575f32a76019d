// ShmEngine (shm_engine.h): which shared-memory path each op takes, and the collective set-up of the pool
// and the staging area.
#include "collectives/shm/shm_engine.h"

#include <fmt/format.h>

#include "base/check.h"
#include "collectives/shm/allgather.h"
#include "collectives/shm/allreduce.h"
#include "collectives/shm/alltoall.h"
#include "collectives/shm/barrier.h"
#include "collectives/shm/broadcast.h"
#include "collectives/shm/memory_pool.h"
#include "collectives/shm/pool_allreduce.h"
#include "collectives/shm/reduce_scatter.h"
#include "collectives/shm/staging_area.h"

namespace braid::collectives::shm {

ShmEngine::ShmEngine(GroupShape shape, std::shared_ptr<store::Store> store, int lanes, Millis timeout, Limits limits)
    : shape_(std::move(shape)), store_(std::move(store)), lanes_(lanes), timeout_(timeout), limits_(limits) {
  BRAID_CHECK_ARG(store_ != nullptr, "the shared-memory engine of group '{}' needs the group's store", shape_.name);
  BRAID_CHECK_ARG(shape_.size > 1, "the shared-memory engine of group '{}' needs more than one rank", shape_.name);
}

ShmEngine::~ShmEngine() = default;

std::shared_ptr<Storage> ShmEngine::allocate_shared(size_t nbytes, uint64_t first_seq) {
  std::shared_ptr<MemoryPool> pool;
  {
    std::unique_lock<std::mutex> lock(pool_mu_);
    if (!pool_tried_) {
      pool_tried_ = true;
      if (limits_.pool_bytes > 0) {
        // Ops issued before this call may already run on the lanes; only later ones may use the pool, so
        // that every rank draws the line at the same op.
        lock.unlock();
        auto created = MemoryPool::create(*store_, fmt::format("braid/pg/{}/shm/", shape_.name), shape_.rank,
                                          shape_.size, limits_.pool_bytes, timeout_);
        lock.lock();
        pool_ = std::move(created);
        pool_first_seq_ = first_seq;
      }
    }
    pool = pool_;
  }
  void* p = pool ? pool->allocate(nbytes) : nullptr;
  if (p == nullptr) return nullptr;
  return Storage::wrap(p, nbytes, Device::cpu(), [pool, nbytes](void* q) { pool->deallocate(q, nbytes); });
}

std::shared_ptr<MemoryPool> ShmEngine::pool_for(uint64_t seq) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  return pool_ && seq >= pool_first_seq_ ? pool_ : nullptr;
}

StagingArea* ShmEngine::staging_for(const Tensor& buffer, const OpContext& ctx) {
  if (buffer.nbytes() == 0 || static_cast<int64_t>(buffer.nbytes()) > limits_.staging_max_bytes) return nullptr;
  return staging(ctx);
}

StagingArea* ShmEngine::staging(const OpContext& ctx) {
  if (limits_.staging_max_bytes == 0 || ctx.lane >= MemoryPool::kMaxLanes) return nullptr;
  // Another lane's op may be setting the staging up: it waits here for the store exchange, which the other
  // ranks join from whichever of their ops gets here first (the keys are the group's, not an op's).
  std::lock_guard<std::mutex> lock(staging_mu_);
  if (!staging_tried_) {
    staging_ = StagingArea::create(*store_, fmt::format("braid/pg/{}/shm-staging/", shape_.name), shape_.rank,
                                   shape_.size, lanes_, ctx.deadline.remaining());
    staging_tried_ = true;
  }
  return staging_.get();
}

bool ShmEngine::broadcast(Tensor& buffer, int root, const OpContext& ctx) {
  StagingArea* area = staging_for(buffer, ctx);
  if (area == nullptr) return false;
  staged_broadcast(*area, buffer, root, ctx);
  counts_[kBroadcast].fetch_add(1);
  return true;
}

bool ShmEngine::allreduce(Tensor& buffer, EngineOp op, const OpContext& ctx) {
  // Every condition before a shared exchange must read the same on every rank: the op, dtype and size are
  // the same everywhere by the collective's contract, the limits by configuration, and whether a pool
  // exists for seq or the staging at all by their collective setups.
  if (!pool_allreduce_supports(buffer.dtype(), op) || !buffer.device().is_cpu() || ctx.lane >= MemoryPool::kMaxLanes) {
    return false;
  }
  if (static_cast<int64_t>(buffer.nbytes()) >= limits_.pool_min_bytes) {
    const auto pool = pool_for(ctx.seq);
    if (pool && pool_allreduce(*pool, buffer, ctx)) {
      counts_[kPoolAllreduce].fetch_add(1);
      return true;
    }
  }
  StagingArea* area = staging_for(buffer, ctx);
  if (area == nullptr) return false;
  staged_allreduce(*area, buffer, ctx);
  counts_[kAllreduce].fetch_add(1);
  return true;
}

bool ShmEngine::allgather(const Tensor& input, Tensor& output, const OpContext& ctx) {
  // The input's size is the same on every rank by the collective's contract, and so is the output's.
  StagingArea* area = staging_for(output, ctx);
  if (area == nullptr) return false;
  staged_allgather(*area, input, output, ctx);
  counts_[kAllgather].fetch_add(1);
  return true;
}

bool ShmEngine::alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                         const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& recv_counts,
                         const std::vector<int64_t>& recv_offsets, const OpContext& ctx) {
  // Sizes may differ from rank to rank here: the op itself checks the largest against the maximum, after
  // the ranks exchanged their sizes, so that every rank takes the same path (a rank whose own input is
  // over it declines at once).
  StagingArea* area = staged_alltoall_fits(shape_.size) ? staging(ctx) : nullptr;
  if (area == nullptr) return false;
  const AlltoallPieces pieces{send_counts, send_offsets, recv_counts, recv_offsets,
                              static_cast<int64_t>(output.element_size())};
  if (!staged_alltoall(*area, input, output, pieces, limits_.staging_max_bytes, ctx)) return false;
  counts_[kAlltoall].fetch_add(1);
  return true;
}

bool ShmEngine::reduce_scatter(const Tensor& input, Tensor& output, EngineOp op, const OpContext& ctx) {
  // The input's size, dtype and op are the same on every rank by the collective's contract.
  StagingArea* area = staged_reduce_scatter_supports(output.dtype(), op) ? staging_for(input, ctx) : nullptr;
  if (area == nullptr) return false;
  const auto* in = static_cast<const char*>(input.data_ptr());
  const auto* out = static_cast<const char*>(output.data_ptr());
  // The staged sum writes the output while it still reads the input: an output inside the input (this
  // rank's block, in place) gets its sum in a buffer of its own first.
  const bool overlaps = out < in + input.nbytes() && in < out + output.nbytes();
  if (overlaps) {
    Tensor separate = output.clone();
    staged_reduce_scatter(*area, input, separate, ctx);
    output.copy_(separate);
  } else {
    staged_reduce_scatter(*area, input, output, ctx);
  }
  counts_[kReduceScatter].fetch_add(1);
  return true;
}

bool ShmEngine::barrier(const OpContext& ctx) {
  StagingArea* area = staging(ctx);
  if (area == nullptr) return false;
  staged_barrier(*area, ctx);
  counts_[kBarrier].fetch_add(1);
  return true;
}

void ShmEngine::post_send(const Tensor&, int, int, const Deadline&, std::shared_ptr<Work>) {
  BRAID_THROW(InternalError, "group '{}': the shared-memory engine has no point-to-point", shape_.name);
}

void ShmEngine::post_recv(Tensor&, int, int, const Deadline&, std::shared_ptr<Work>) {
  BRAID_THROW(InternalError, "group '{}': the shared-memory engine has no point-to-point", shape_.name);
}

std::vector<std::pair<std::string, uint64_t>> ShmEngine::counters() const {
  static constexpr const char* kNames[kCounters] = {"pool_allreduce", "broadcast", "allreduce", "allgather",
                                                    "alltoall", "reduce_scatter", "barrier"};
  std::vector<std::pair<std::string, uint64_t>> out;
  for (int i = 0; i < kCounters; ++i) out.emplace_back(kNames[i], counts_[i].load());
  return out;
}

}  // namespace braid::collectives::shm
