#include "collectives/queue/monitored_barrier.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "base/check.h"
#include "base/deadline.h"

namespace braid::collectives {

void monitored_barrier(store::Store& group_store, const GroupShape& shape, uint64_t n, Millis limit, bool wait_all_ranks) {
  const Deadline deadline = Deadline::after(limit);
  const std::string prefix = fmt::format("braid/pg/{}/monitored_barrier/{}/", shape.name, n);
  const std::string done_key = prefix + "done";
  if (shape.rank != 0) {
    group_store.set(prefix + std::to_string(shape.rank), store::to_bytes("1"));
    std::string verdict;
    try {
      verdict = store::to_string(group_store.get(done_key, deadline.remaining()));
    } catch (const TimeoutError&) {
      BRAID_THROW(TimeoutError, "monitored_barrier #{} on group '{}' (rank {}/{}): rank 0 did not finish the barrier "
                  "within {} ms", n, shape.name, shape.rank, shape.size, limit.count());
    }
    if (verdict != "ok") BRAID_THROW(CommError, "monitored_barrier #{} on group '{}' (rank {}/{}): {}", n, shape.name, shape.rank,
                                     shape.size, verdict);
    return;
  }
  std::vector<int> missing;
  for (int r = 1; r < shape.size; ++r) {
    const std::string key = prefix + std::to_string(r);
    if (!missing.empty()) {
      // Out of time already: the remaining ranks either checked in by now or they are missing too.
      if (!group_store.check({key})) missing.push_back(r);
      continue;
    }
    try {
      group_store.wait({key}, deadline.remaining());
    } catch (const TimeoutError&) {
      missing.push_back(r);
      if (!wait_all_ranks) break;
    }
  }
  if (missing.empty()) {
    group_store.set(done_key, store::to_bytes("ok"));
    return;
  }
  const std::string message =
      missing.size() == 1 ? fmt::format("Rank {} failed to pass monitoredBarrier in {} ms", missing[0], limit.count())
                          : fmt::format("Ranks {} failed to pass monitoredBarrier in {} ms", fmt::join(missing, ", "),
                                        limit.count());
  group_store.set(done_key, store::to_bytes(message));
  BRAID_THROW(CommError, "monitored_barrier #{} on group '{}' (rank 0/{}): {}", n, shape.name, shape.size, message);
}

}  // namespace braid::collectives
