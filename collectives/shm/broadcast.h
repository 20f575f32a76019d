// Broadcast through shared memory, for groups whose ranks are all on one host: the root copies its tensor,
// a chunk at a time, into its staging blocks (staging_area.h) and publishes each chunk; every other
// rank copies it out. One copy in and one copy out per rank and no socket: on 4 ranks over 2 cores a
// 4 KiB broadcast took ~80 µs through gloo's binomial tree over TCP loopback and ~15 µs here
// (docs/PERFORMANCE.md has the measurements).
//
// Chunk g, in block g % 2 of the root's segment:
//   root:   wait until every rank is done with chunk g - 2, copy the header and the chunk in, publish done;
//   others: wait until the root's data is in, check the size, copy the chunk out, publish done.
// The root does not wait for the readers of its last chunks (its tensor is free once copied, as in MPI's
// eager broadcast); the next op on the lane that needs the block does.
#pragma once

#include "collectives/core/engine.h"
#include "collectives/shm/staging_area.h"

namespace braid::collectives::shm {

// Broadcasts `buffer` (contiguous, CPU, not empty) from `root` on ctx.lane, which must be below
// staging.lanes(). Throws TimeoutError naming the ranks that did not come by ctx.deadline, CommError when
// a rank it waits for has exited, and CommError when the root's message has another size than this
// rank's buffer.
void staged_broadcast(StagingArea& staging, Tensor& buffer, int root, const OpContext& ctx);

}  // namespace braid::collectives::shm
