// An allreduce over buffers that every rank allocated from its group's MemoryPool: each rank sums
// its share of the elements across every rank's buffer and writes the sum into every buffer, so the data
// crosses memory once instead of going through the engine's copies (Open MPI's single-copy receive into a
// temporary, then the reduction; Gloo's two socket copies). On 2 ranks with 64 MiB buckets this cut the
// CPU time of an allreduce from about 17 ms to about 6 ms (docs/PERFORMANCE.md, DDP).
//
// Protocol, per op, on the op's lane (ops of one lane run one at a time, in the same order on every rank):
//   1. publish the buffer's offset in this rank's segment (-1 when it is not in the pool) and its size,
//      then arrive (phase 1); wait until every rank arrived;
//   2. if every rank's buffer is in its pool and of the same size, reduce this rank's share (contiguous,
//      64-byte aligned blocks of elements, rank r the r-th block) in rank order 0..n-1 — so every rank
//      ends with the same bits — and store it into every rank's buffer;
//   3. arrive (phase 2) and wait until every rank did: then every share is written, and no rank reads a
//      buffer its owner is about to reuse.
// When some buffer is not in its pool every rank returns false after step 3 alike, and the caller runs
// the engine's allreduce instead.
#pragma once

#include "collectives/core/engine.h"
#include "collectives/shm/memory_pool.h"

namespace braid::collectives::shm {

// The dtypes and op the shared path reduces; others always go to the engine.
bool pool_allreduce_supports(DType dtype, EngineOp op);

// Throws TimeoutError naming the ranks that did not arrive when ctx.deadline passes.
bool pool_allreduce(MemoryPool& pool, Tensor& buffer, const OpContext& ctx);

}  // namespace braid::collectives::shm
