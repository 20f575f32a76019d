// Per-call options of the collectives (torch's BroadcastOptions, AllreduceOptions, ...). A timeout left
// unset means the group's timeout.
#pragma once

#include <chrono>
#include <optional>
#include <vector>

#include "collectives/core/reduce_op.h"

namespace braid::collectives {

using Millis = std::chrono::milliseconds;

// The default timeout of a process group (torch's default for gloo and MPI: 30 minutes).
inline constexpr Millis kDefaultCollectiveTimeout{30 * 60 * 1000};

struct BroadcastOptions {
  int64_t root_rank = 0;
  int64_t root_tensor = 0;  // which of the root's tensors is the source
  std::optional<Millis> timeout;
};

struct AllreduceOptions {
  ReduceOp reduce_op = ReduceOp::SUM;
  std::optional<Millis> timeout;
};

struct AllreduceCoalescedOptions {
  ReduceOp reduce_op = ReduceOp::SUM;
  std::optional<Millis> timeout;
};

struct ReduceOptions {
  ReduceOp reduce_op = ReduceOp::SUM;
  int64_t root_rank = 0;
  int64_t root_tensor = 0;
  std::optional<Millis> timeout;
};

struct AllgatherOptions {
  std::optional<Millis> timeout;
};

struct GatherOptions {
  int64_t root_rank = 0;
  std::optional<Millis> timeout;
};

struct ScatterOptions {
  int64_t root_rank = 0;
  std::optional<Millis> timeout;
};

struct ReduceScatterOptions {
  ReduceOp reduce_op = ReduceOp::SUM;
  std::optional<Millis> timeout;
  // The caller gives up the input's contents (FSDP's full gradients): an engine that reduces through a
  // copy of the input (mpi, for large inputs) reduces in it instead. The input is undefined afterwards.
  bool input_is_scratch = false;
};

struct AllToAllOptions {
  std::optional<Millis> timeout;
};

struct BarrierOptions {
  std::optional<Millis> timeout;
};

}  // namespace braid::collectives
