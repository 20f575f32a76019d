// QueuedProcessGroup's shared-memory paths: the pool behind empty_shared() and the allreduce through it
// (shared_memory_pool.h, shared_allreduce.h), and the staging that broadcasts, allgathers, alltoalls,
// reduce_scatters, barriers and the allreduces of other buffers go through (shared_staging.h,
// shared_broadcast.h, staged_allreduce.h, staged_allgather.h, staged_alltoall.h, staged_reduce_scatter.h,
// staged_barrier.h).
#include <fmt/format.h>

#include "collectives/queued_process_group.h"
#include "collectives/shared_allreduce.h"
#include "collectives/shared_broadcast.h"
#include "collectives/shared_memory_pool.h"
#include "collectives/staged_allgather.h"
#include "collectives/staged_allreduce.h"
#include "collectives/staged_alltoall.h"
#include "collectives/staged_barrier.h"
#include "collectives/staged_reduce_scatter.h"

namespace braid::collectives {

Tensor QueuedProcessGroup::empty_shared(const Shape& shape, DType dtype, Device device) {
  if (!device.is_cpu()) return Tensor::empty(shape, TensorOptions(dtype, device));
  std::shared_ptr<SharedMemoryPool> pool;
  {
    std::unique_lock<std::mutex> lock(pool_mu_);
    if (!pool_tried_) {
      pool_tried_ = true;
      if (config_.store && size() > 1 && accepts_cpu() && shared_pool_bytes_ > 0) {
        // Ops issued before this call may already run on the lanes; only later ones may use the pool, so
        // that every rank draws the line at the same op.
        const uint64_t first = sequence_number() + 1;
        lock.unlock();
        auto created = SharedMemoryPool::create(*config_.store, fmt::format("braid/pg/{}/shm/", name()), rank(),
                                                size(), shared_pool_bytes_, timeout());
        lock.lock();
        pool_ = std::move(created);
        pool_first_seq_ = first;
      }
    }
    pool = pool_;
  }
  const size_t nbytes = static_cast<size_t>(shape_numel(shape)) * element_size(dtype);
  void* p = pool ? pool->allocate(nbytes) : nullptr;
  if (p == nullptr) return Tensor::empty(shape, TensorOptions(dtype));
  auto storage = Storage::wrap(p, nbytes, Device::cpu(), [pool, nbytes](void* q) { pool->deallocate(q, nbytes); });
  return Tensor::from_storage(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

std::shared_ptr<SharedMemoryPool> QueuedProcessGroup::shared_pool_for(uint64_t seq) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  return pool_ && seq >= pool_first_seq_ ? pool_ : nullptr;
}

bool QueuedProcessGroup::try_shared_allreduce(Tensor& buffer, EngineOp op, const OpContext& ctx) {
  // Every condition before a shared exchange must read the same on every rank: the op, dtype and size are
  // the same everywhere by the collective's contract, the limits by configuration, and whether a pool
  // exists for seq or the staging at all by their collective setups.
  if (!shared_allreduce_supports(buffer.dtype(), op) || !buffer.device().is_cpu() ||
      ctx.lane >= SharedMemoryPool::kMaxLanes) {
    return false;
  }
  if (static_cast<int64_t>(buffer.nbytes()) >= shared_min_bytes_) {
    const auto pool = shared_pool_for(ctx.seq);
    if (pool && shared_allreduce(*pool, buffer, ctx)) {
      shared_allreduces_.fetch_add(1);
      return true;
    }
  }
  SharedStaging* staging = staging_for(buffer, ctx);
  if (staging == nullptr) return false;
  staged_allreduce(*staging, buffer, ctx);
  staged_allreduces_.fetch_add(1);
  return true;
}

SharedStaging* QueuedProcessGroup::staging_for(const Tensor& buffer, const OpContext& ctx) {
  if (buffer.nbytes() == 0 || static_cast<int64_t>(buffer.nbytes()) > shared_staging_max_) return nullptr;
  return staging_on(buffer.device(), ctx);
}

SharedStaging* QueuedProcessGroup::staging_on(Device device, const OpContext& ctx) {
  if (shared_staging_max_ == 0 || !config_.store || size() < 2 || !device.is_cpu() ||
      ctx.lane >= SharedMemoryPool::kMaxLanes) {
    return nullptr;
  }
  // Another lane's op may be setting the staging up: it waits here for the store exchange, which the other
  // ranks join from whichever of their ops gets here first (the keys are the group's, not an op's).
  std::lock_guard<std::mutex> lock(staging_mu_);
  if (!staging_tried_) {
    staging_ = SharedStaging::create(*config_.store, fmt::format("braid/pg/{}/shm-staging/", name()), rank(), size(),
                                     lanes(), ctx.deadline.remaining());
    staging_tried_ = true;
  }
  return staging_.get();
}

bool QueuedProcessGroup::try_shared_broadcast(Tensor& buffer, int root, const OpContext& ctx) {
  SharedStaging* staging = staging_for(buffer, ctx);
  if (staging == nullptr) return false;
  shared_broadcast(*staging, buffer, root, ctx);
  shared_broadcasts_.fetch_add(1);
  return true;
}

void QueuedProcessGroup::allgather_flat(const Tensor& input, Tensor& output, const OpContext& ctx) {
  // The input's size is the same on every rank by the collective's contract, and so is the output's.
  SharedStaging* staging = staging_for(output, ctx);
  if (staging == nullptr) {
    run_allgather(input, output, ctx);
    return;
  }
  staged_allgather(*staging, input, output, ctx);
  staged_allgathers_.fetch_add(1);
}

void QueuedProcessGroup::alltoall_flat(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                                       const std::vector<int64_t>& send_offsets,
                                       const std::vector<int64_t>& recv_counts,
                                       const std::vector<int64_t>& recv_offsets, const OpContext& ctx) {
  // Sizes may differ from rank to rank here: the op itself checks the largest against the maximum, after
  // the ranks exchanged their sizes, so that every rank takes the same path (a rank whose own input is
  // over it leaves for the engine at once).
  SharedStaging* staging = staged_alltoall_fits(size()) ? staging_on(input.device(), ctx) : nullptr;
  const AlltoallPieces pieces{send_counts, send_offsets, recv_counts, recv_offsets,
                              static_cast<int64_t>(output.element_size())};
  if (staging != nullptr && staged_alltoall(*staging, input, output, pieces, shared_staging_max_, ctx)) {
    staged_alltoalls_.fetch_add(1);
    return;
  }
  run_alltoall(input, output, send_counts, send_offsets, recv_counts, recv_offsets, ctx);
}

void QueuedProcessGroup::reduce_scatter_flat(const Tensor& input, Tensor& output, EngineOp op,
                                             const OpContext& ctx) {
  // The input's size, dtype and op are the same on every rank by the collective's contract.
  SharedStaging* staging = staged_reduce_scatter_supports(output.dtype(), op) ? staging_for(input, ctx) : nullptr;
  if (staging == nullptr) {
    run_reduce_scatter(input, output, op, ctx);
    return;
  }
  const auto* in = static_cast<const char*>(input.data_ptr());
  const auto* out = static_cast<const char*>(output.data_ptr());
  // The staged sum writes the output while it still reads the input: an output inside the input (this
  // rank's block, in place) gets its sum in a buffer of its own first.
  const bool overlaps = out < in + input.nbytes() && in < out + output.nbytes();
  if (overlaps) {
    Tensor separate = output.clone();
    staged_reduce_scatter(*staging, input, separate, ctx);
    output.copy_(separate);
  } else {
    staged_reduce_scatter(*staging, input, output, ctx);
  }
  staged_reduce_scatters_.fetch_add(1);
}

bool QueuedProcessGroup::try_staged_barrier(const OpContext& ctx) {
  SharedStaging* staging = staging_on(engine_device(), ctx);
  if (staging == nullptr) return false;
  staged_barrier(*staging, ctx);
  staged_barriers_.fetch_add(1);
  return true;
}

}  // namespace braid::collectives
