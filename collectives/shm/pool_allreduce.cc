#include "collectives/shm/pool_allreduce.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/shm/rank_order_sum.h"
#include "collectives/shm/peer_wait.h"

namespace braid::collectives::shm {

bool pool_allreduce_supports(DType dtype, EngineOp op) {
  return op == EngineOp::SUM && (dtype == DType::Float32 || dtype == DType::Float64);
}

bool pool_allreduce(MemoryPool& pool, Tensor& buffer, const OpContext& ctx) {
  const int lane = ctx.lane;
  const int rank = pool.rank();
  const auto bytes = static_cast<int64_t>(buffer.nbytes());
  const uint64_t gen = ++pool.generation(lane);

  MemoryPool::ControlSlot& mine = pool.slot(rank, lane);
  mine.offset = buffer.is_contiguous() ? pool.offset_of(buffer.data_ptr(), buffer.nbytes()) : -1;
  mine.bytes = bytes;
  mine.arrived.store(2 * gen - 1, std::memory_order_release);
  wait_for_ranks(pool, lane, all_ranks(pool), 2 * gen - 1, bytes, ctx, "allreduce", "enter it");

  bool shared = true;
  for (int r = 0; r < pool.size(); ++r) {
    const auto& s = pool.slot(r, lane);
    shared = shared && s.offset >= 0 && s.bytes == bytes;
  }
  if (shared) {
    const int64_t per = share_elements(buffer.numel(), pool.size());
    const int64_t begin = std::min(buffer.numel(), per * rank), end = std::min(buffer.numel(), begin + per);
    if (buffer.dtype() == DType::Float32) {
      std::vector<float*> bufs;
      for (int r = 0; r < pool.size(); ++r) {
        bufs.push_back(reinterpret_cast<float*>(pool.segment(r) + pool.slot(r, lane).offset));
      }
      reduce_share(bufs, begin, end);
    } else {
      std::vector<double*> bufs;
      for (int r = 0; r < pool.size(); ++r) {
        bufs.push_back(reinterpret_cast<double*>(pool.segment(r) + pool.slot(r, lane).offset));
      }
      reduce_share(bufs, begin, end);
    }
  }
  mine.arrived.store(2 * gen, std::memory_order_release);
  wait_for_ranks(pool, lane, all_ranks(pool), 2 * gen, bytes, ctx, "allreduce", "finish it");
  return shared;
}

}  // namespace braid::collectives::shm
