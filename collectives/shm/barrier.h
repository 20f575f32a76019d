// Barrier through the group's staging (staging_area.h), for groups whose ranks are all on one host:
// each rank publishes its arrival in its control slot for the lane and waits until every rank's is
// there. No message crosses a socket; gloo's barrier is an allreduce over TCP loopback.
//
// The barrier counts as one chunk of the lane but moves no data, so each rank publishes it as done at
// once: a later op's writer, waiting for every rank to be done with the chunk before last, is not held
// back by it.
#pragma once

#include "collectives/core/engine.h"
#include "collectives/shm/staging_area.h"

namespace braid::collectives::shm {

// Returns once every rank of the staging's group has entered the barrier on ctx.lane, which must be below
// staging.lanes(). Throws TimeoutError naming the ranks that did not come by ctx.deadline, and CommError
// when a rank it waits for has exited.
void staged_barrier(StagingArea& staging, const OpContext& ctx);

}  // namespace braid::collectives::shm
