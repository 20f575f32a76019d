// Allgather of ordinary CPU buffers through the group's staging blocks (staging_area.h), for groups
// whose ranks are all on one host. gloo's ring over TCP loopback moves every byte through two socket
// copies and the kernel on the way; here each rank copies its input into shared memory once and every
// other rank's input out of it once (docs/PERFORMANCE.md has the measurements).
//
// Chunk g, in block g % 2 of every rank's segment:
//   1. wait until every rank is done with chunk g - 2, copy the header (the input's size) and this rank's
//      chunk in, publish data-in, and copy the chunk straight into this rank's own part of the output;
//   2. for every other rank, starting after this one (so that the ranks read different blocks at a time),
//      wait until its data is in and copy its chunk into its part of the output; publish done.
// The first chunk waits for every rank's data first and checks every rank's size, so that on a mismatch
// every rank fails alike.
#pragma once

#include "collectives/core/engine.h"
#include "collectives/shm/staging_area.h"

namespace braid::collectives::shm {

// Gathers `input` (contiguous, CPU, not empty) from every rank into `output` (contiguous, world size times
// input's bytes, in rank order) on ctx.lane, which must be below staging.lanes(). `input` may be this
// rank's part of `output`. Throws TimeoutError naming the ranks that did not come by ctx.deadline,
// CommError when a rank it waits for has exited, and CommError when the ranks' inputs differ in size.
void staged_allgather(StagingArea& staging, const Tensor& input, Tensor& output, const OpContext& ctx);

}  // namespace braid::collectives::shm
