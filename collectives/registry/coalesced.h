// broadcast_coalesced: broadcasts many tensors from one rank in few, large messages (torch's
// _broadcast_coalesced, used by DDP to send the initial module state and buffers).
//
// Tensors are bucketed by (dtype, device), in list order: a tensor joins the open bucket of its kind,
// and a bucket closes once it holds at least `buffer_size_bytes` (so one bucket may exceed the limit by
// its last tensor, and a tensor larger than the limit travels alone). Buckets are issued in the order of
// their first tensor; each is packed into one flat buffer, broadcast, and unpacked into the tensors of
// every non-root rank. All broadcasts are in flight before the first wait.
//
// Every rank must pass tensors of the same dtypes, devices and sizes in the same order (as for any
// collective); non-contiguous tensors are fine. Sparse tensors are refused.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "collectives/core/process_group.h"

namespace braid::collectives {

// Blocks until every tensor holds the root's values. `root` is a rank of `group`. `timeout` bounds the
// whole call (the group's timeout when unset). Throws what the broadcasts throw.
void broadcast_coalesced(ProcessGroup& group, const TensorList& tensors, size_t buffer_size_bytes, int root = 0,
                         std::optional<Millis> timeout = std::nullopt);

// The buckets broadcast_coalesced would form: each is a list of indices into `tensors`, in list order.
std::vector<std::vector<size_t>> coalesce_buckets(const TensorList& tensors, size_t buffer_size_bytes);

}  // namespace braid::collectives
