#include "collectives/shm/broadcast.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "base/error.h"
#include "collectives/shm/peer_wait.h"

namespace braid::collectives::shm {

void staged_broadcast(StagingArea& staging, Tensor& buffer, int root, const OpContext& ctx) {
  MemoryPool& pool = staging.pool();
  const int lane = ctx.lane;
  const int rank = pool.rank();
  const auto bytes = static_cast<int64_t>(buffer.nbytes());
  BRAID_ASSERT(lane < staging.lanes() && bytes > 0 && buffer.is_contiguous(), "shared broadcast of {} bytes on lane {}",
               bytes, lane);
  MemoryPool::ControlSlot& mine = pool.slot(rank, lane);
  auto* bytes_ptr = static_cast<char*>(buffer.data_ptr());
  const auto chunk_max = static_cast<int64_t>(staging.chunk_bytes());
  for (int64_t done = 0; done < bytes; done += chunk_max) {
    const int64_t chunk = std::min(chunk_max, bytes - done);
    const auto n = static_cast<size_t>(chunk);
    const uint64_t gen = ++pool.generation(lane);
    char* block = staging.block(root, lane, static_cast<int>(gen % 2));
    auto* header = reinterpret_cast<int64_t*>(block);
    char* data = block + kStagingHeaderBytes;
    if (rank == root) {
      if (gen > 2) {
        wait_for_ranks(pool, lane, all_ranks(pool), staged_done(gen - 2), chunk, ctx, "broadcast", "copy out a chunk");
      }
      *header = bytes;
      std::memcpy(data, bytes_ptr + done, n);
      mine.arrived.store(staged_done(gen), std::memory_order_release);
    } else {
      wait_for_ranks(pool, lane, {root, root + 1}, staged_data_in(gen), chunk, ctx, "broadcast", "copy in a chunk");
      if (*header != bytes) {
        // Release the block for the root's later chunks, then fail: the group is broken from here on.
        mine.arrived.store(staged_done(gen), std::memory_order_release);
        BRAID_THROW(CommError, "{}: invalid tensor size: the root (rank {}) broadcasts {} bytes, rank {} expects {}",
                    ctx.what, root, *header, rank, bytes);
      }
      std::memcpy(bytes_ptr + done, data, n);
      mine.arrived.store(staged_done(gen), std::memory_order_release);
    }
  }
}

}  // namespace braid::collectives::shm
