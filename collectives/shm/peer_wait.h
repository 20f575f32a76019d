// Waiting for other ranks' progress words in a MemoryPool's control slots, shared by the collectives
// that run through shared memory (pool_allreduce.h, broadcast.h, allreduce.h).
//
// The wait spins briefly when every rank of the pool has a core (they are then running and about to
// arrive), yields through a busy window that covers the copy or reduction of `bytes` (the op's, or the
// chunk's for the staged ops: what the awaited rank does between two arrivals), then sleeps in growing
// steps (up to 50 µs) so that a rank far behind (still computing) gets the core. It ends at the op's
// deadline with a TimeoutError naming the ranks that had not arrived, or, within 100 ms, with a
// CommError when the rank it waits for has exited (a crashed peer closes no socket here to tell).
#pragma once

#include <cstdint>

#include "collectives/core/engine.h"
#include "collectives/shm/memory_pool.h"
#include "collectives/shm/staging_area.h"

namespace braid::collectives::shm {

// Ranks [begin, end) of the pool.
struct RankRange {
  int begin;
  int end;
};
inline RankRange all_ranks(const MemoryPool& pool) { return {0, pool.size()}; }

// Returns once slot(r, lane).arrived >= target for every r in `ranks`. `what` ends the timeout message:
// "<ctx.what>: the shared-memory <op> waited N ms for rank(s) 1, 3 to <what>".
void wait_for_ranks(MemoryPool& pool, int lane, RankRange ranks, uint64_t target, int64_t bytes,
                    const OpContext& ctx, const char* op, const char* what);

// After every rank's data of chunk `gen` is in: checks that every rank's staging block (`parity` of
// `lane`) has `bytes` in its header, as this rank's. On a mismatch this rank publishes it is done with the
// chunk (so the others' later chunks are not held back) and throws a CommError naming both sizes:
// "invalid tensor size: rank 1 <verb> 16 bytes, rank 0 <verb> 8 bytes". Every rank checks every rank, so
// all fail alike.
void check_staged_sizes(StagingArea& staging, int lane, int parity, uint64_t gen, int64_t bytes,
                        const OpContext& ctx, const char* verb);

}  // namespace braid::collectives::shm
