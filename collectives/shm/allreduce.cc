#include "collectives/shm/allreduce.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "collectives/shm/pool_allreduce.h"
#include "collectives/shm/rank_order_sum.h"
#include "collectives/shm/peer_wait.h"

namespace braid::collectives::shm {
namespace {

template <typename T>
void reduce_chunk_share(StagingArea& staging, int lane, int parity, int64_t chunk_elements) {
  MemoryPool& pool = staging.pool();
  const int64_t per = share_elements(chunk_elements, pool.size());
  const int64_t begin = std::min(chunk_elements, per * pool.rank());
  const int64_t end = std::min(chunk_elements, begin + per);
  if (begin == end) return;
  std::vector<T*> blocks;
  blocks.reserve(static_cast<size_t>(pool.size()));
  for (int r = 0; r < pool.size(); ++r) {
    blocks.push_back(reinterpret_cast<T*>(staging.block(r, lane, parity) + kStagingHeaderBytes));
  }
  reduce_share(blocks, begin, end);
}

}  // namespace

bool staged_allreduce_supports(DType dtype, EngineOp op) { return pool_allreduce_supports(dtype, op); }

void staged_allreduce(StagingArea& staging, Tensor& buffer, const OpContext& ctx) {
  MemoryPool& pool = staging.pool();
  const int lane = ctx.lane;
  const auto bytes = static_cast<int64_t>(buffer.nbytes());
  const auto element = static_cast<int64_t>(buffer.element_size());
  BRAID_ASSERT(lane < staging.lanes() && bytes > 0 && buffer.is_contiguous() &&
                   staged_allreduce_supports(buffer.dtype(), EngineOp::SUM),
               "staged allreduce of {} bytes of {} on lane {}", bytes, dtype_name(buffer.dtype()), lane);
  MemoryPool::ControlSlot& mine = pool.slot(pool.rank(), lane);
  auto* data = static_cast<char*>(buffer.data_ptr());
  // A whole number of elements per chunk: its shares are counted in elements.
  const int64_t chunk_max = static_cast<int64_t>(staging.chunk_bytes()) / element * element;
  for (int64_t done = 0; done < bytes; done += chunk_max) {
    const int64_t n = std::min(chunk_max, bytes - done);
    const uint64_t gen = ++pool.generation(lane);
    const int parity = static_cast<int>(gen % 2);
    char* own = staging.block(pool.rank(), lane, parity);
    if (gen > 2) {
      wait_for_ranks(pool, lane, all_ranks(pool), staged_done(gen - 2), n, ctx, "allreduce", "finish a chunk");
    }
    *reinterpret_cast<int64_t*>(own) = bytes;
    std::memcpy(own + kStagingHeaderBytes, data + done, static_cast<size_t>(n));
    mine.arrived.store(staged_data_in(gen), std::memory_order_release);
    wait_for_ranks(pool, lane, all_ranks(pool), staged_data_in(gen), n, ctx, "allreduce", "copy in a chunk");
    check_staged_sizes(staging, lane, parity, gen, bytes, ctx, "reduces");
    if (buffer.dtype() == DType::Float32) {
      reduce_chunk_share<float>(staging, lane, parity, n / element);
    } else {
      reduce_chunk_share<double>(staging, lane, parity, n / element);
    }
    mine.arrived.store(staged_reduced(gen), std::memory_order_release);
    wait_for_ranks(pool, lane, all_ranks(pool), staged_reduced(gen), n, ctx, "allreduce", "reduce its share");
    std::memcpy(data + done, own + kStagingHeaderBytes, static_cast<size_t>(n));
    mine.arrived.store(staged_done(gen), std::memory_order_release);
  }
}

}  // namespace braid::collectives::shm
