#include "collectives/shm/barrier.h"

#include "base/check.h"
#include "collectives/shm/peer_wait.h"

namespace braid::collectives::shm {

void staged_barrier(StagingArea& staging, const OpContext& ctx) {
  MemoryPool& pool = staging.pool();
  BRAID_ASSERT(ctx.lane < staging.lanes(), "staged barrier on lane {}", ctx.lane);
  const uint64_t gen = ++pool.generation(ctx.lane);
  pool.slot(pool.rank(), ctx.lane).arrived.store(staged_done(gen), std::memory_order_release);
  wait_for_ranks(pool, ctx.lane, all_ranks(pool), staged_data_in(gen), 0, ctx, "barrier", "enter it");
}

}  // namespace braid::collectives::shm
