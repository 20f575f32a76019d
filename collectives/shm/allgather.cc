#include "collectives/shm/allgather.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "collectives/shm/peer_wait.h"

namespace braid::collectives::shm {

void staged_allgather(StagingArea& staging, const Tensor& input, Tensor& output, const OpContext& ctx) {
  MemoryPool& pool = staging.pool();
  const int lane = ctx.lane;
  const int me = pool.rank();
  const int ranks = pool.size();
  const auto bytes = static_cast<int64_t>(input.nbytes());
  BRAID_ASSERT(lane < staging.lanes() && bytes > 0 && input.is_contiguous() && output.is_contiguous() &&
                   static_cast<int64_t>(output.nbytes()) == bytes * ranks,
               "staged allgather of {} bytes into {} on lane {}", bytes, output.nbytes(), lane);
  MemoryPool::ControlSlot& mine = pool.slot(me, lane);
  const auto* in = static_cast<const char*>(input.data_ptr());
  auto* out = static_cast<char*>(output.data_ptr());
  const auto chunk_max = static_cast<int64_t>(staging.chunk_bytes());
  for (int64_t done = 0; done < bytes; done += chunk_max) {
    const int64_t chunk = std::min(chunk_max, bytes - done);
    const auto n = static_cast<size_t>(chunk);
    const uint64_t gen = ++pool.generation(lane);
    const int parity = static_cast<int>(gen % 2);
    char* own = staging.block(me, lane, parity);
    if (gen > 2) {
      wait_for_ranks(pool, lane, all_ranks(pool), staged_done(gen - 2), chunk, ctx, "allgather", "finish a chunk");
    }
    *reinterpret_cast<int64_t*>(own) = bytes;
    std::memcpy(own + kStagingHeaderBytes, in + done, n);
    mine.arrived.store(staged_data_in(gen), std::memory_order_release);
    char* own_part = out + static_cast<int64_t>(me) * bytes + done;
    if (own_part != in + done) std::memcpy(own_part, in + done, n);
    const bool first = done == 0;
    if (first) {
      wait_for_ranks(pool, lane, all_ranks(pool), staged_data_in(gen), chunk, ctx, "allgather", "copy in a chunk");
      check_staged_sizes(staging, lane, parity, gen, bytes, ctx, "gathers");
    }
    for (int i = 1; i < ranks; ++i) {
      const int r = (me + i) % ranks;
      if (!first) {
        wait_for_ranks(pool, lane, {r, r + 1}, staged_data_in(gen), chunk, ctx, "allgather", "copy in a chunk");
      }
      std::memcpy(out + static_cast<int64_t>(r) * bytes + done, staging.block(r, lane, parity) + kStagingHeaderBytes,
                  n);
    }
    mine.arrived.store(staged_done(gen), std::memory_order_release);
  }
}

}  // namespace braid::collectives::shm
