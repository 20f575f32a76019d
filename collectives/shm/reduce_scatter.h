// Reduce-scatter of ordinary CPU buffers through the group's staging blocks (staging_area.h), for
// groups whose ranks are all on one host: every rank copies the other ranks' blocks of its input into
// shared memory once, and sums its own block across all ranks straight into its output.
//
// As in the alltoall (alltoall.h), a staging block holds one slot per rank, and chunk k carries
// slice k of every block. Chunk g, in block g % 2 of every rank's segment:
//   1. wait until every rank is done with chunk g - 2, write the header (the input's size) and slice k of
//      every other rank's block of the input into its slot, publish data-in;
//   2. for every rank in rank order, wait until its data is in and add its slot for this rank (this
//      rank's own slice straight from the input) into the output; publish done.
// The sum runs in rank order 0..n-1, so the result does not depend on who arrives first. The first chunk
// checks every rank's size, so that on a mismatch every rank fails alike.
#pragma once

#include "collectives/core/engine.h"
#include "collectives/shm/staging_area.h"

namespace braid::collectives::shm {

// The dtypes and op this path reduces (as the staged allreduce's); others go to the engine.
bool staged_reduce_scatter_supports(DType dtype, EngineOp op);

// Sums block rank() of `input` (contiguous, CPU, world size times output's elements, a supported dtype)
// across every rank into `output` (contiguous, not empty) on ctx.lane, which must be below
// staging.lanes(). Throws TimeoutError naming the ranks that did not come by ctx.deadline, CommError
// when a rank it waits for has exited, and CommError when the ranks' inputs differ in size.
void staged_reduce_scatter(StagingArea& staging, const Tensor& input, Tensor& output, const OpContext& ctx);

}  // namespace braid::collectives::shm
