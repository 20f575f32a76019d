// Allreduce of ordinary CPU buffers through the group's staging blocks (staging_area.h), for groups
// whose ranks are all on one host; buffers from empty_shared() take the pool's path instead
// (pool_allreduce.h), which skips the copies in and out.
//
// Chunk g, in block g % 2 of every rank's segment:
//   1. wait until every rank is done with chunk g - 2, copy the header (the whole buffer's size) and this
//      rank's chunk in, publish data-in; wait until every rank's data is in and check the sizes;
//   2. sum this rank's share of the chunk across every rank's block, in rank order, and store the sum into
//      every block (rank_order_sum.h); publish reduced; wait until every rank did;
//   3. copy the chunk out of this rank's own block, now the full sum, and publish done.
// On 2 ranks over 2 cores a 4 KiB float32 allreduce took ~70 µs through gloo's bcube over TCP loopback
// (docs/PERFORMANCE.md has the measurements of this path).
#pragma once

#include "collectives/core/engine.h"
#include "collectives/shm/staging_area.h"

namespace braid::collectives::shm {

// The dtypes and op this path reduces (as the pool's: pool_allreduce_supports); others go to the engine.
bool staged_allreduce_supports(DType dtype, EngineOp op);

// Reduces `buffer` (contiguous, CPU, not empty, a supported dtype) with SUM on ctx.lane, which must be
// below staging.lanes(). Throws TimeoutError naming the ranks that did not come by ctx.deadline,
// CommError when a rank it waits for has exited, and CommError when the ranks' buffers differ in size.
void staged_allreduce(StagingArea& staging, Tensor& buffer, const OpContext& ctx);

}  // namespace braid::collectives::shm
