// monitored_barrier: a barrier that names who did not come (torch's monitored_barrier). Every rank checks in
// through the group's store; rank 0 waits up to the limit and fails with "Rank 2 failed to pass
// monitoredBarrier in 1000 ms" (with wait_all_ranks: every missing rank, "Ranks 1, 3 failed ..."); the
// others then fail with rank 0's message. Synchronous, like torch's; it takes no part in the group's op
// sequence.
#pragma once

#include <cstdint>

#include "collectives/core/engine.h"
#include "collectives/core/options.h"
#include "store/store.h"

namespace braid::collectives {

// The n-th monitored barrier of the group `shape` (every rank counts the same), under the store keys
// "braid/pg/<group>/monitored_barrier/<n>/".
void monitored_barrier(store::Store& group_store, const GroupShape& shape, uint64_t n, Millis limit, bool wait_all_ranks);

}  // namespace braid::collectives
