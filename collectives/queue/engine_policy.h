// EnginePolicy: which engine runs each op of a group. A group has a network engine (mpi, gloo or nccl),
// which takes every op, and, for CPU engines on groups with a store and more than one rank, a local one:
// the shared-memory engine (shm/), which moves data through memory that every rank of one host maps.
//
// The local engine runs an op first when all of these hold (else the network engine runs it):
//
//   op                        | size                                   | dtype and reduce op
//   --------------------------+----------------------------------------+-----------------------------------
//   broadcast                 | 0 < bytes <= local_max_bytes           | any
//   allreduce                 | bytes >= pool_min_bytes (buffers from  | a dtype the local engine reduces
//                             | empty_shared), or 0 < bytes <=         | (float32, float64), SUM (AVG and
//                             | local_max_bytes                        | PREMUL_SUM arrive as SUM)
//   allgather (the output)    | 0 < bytes <= local_max_bytes           | any
//   reduce_scatter (input)    | 0 < bytes <= local_max_bytes           | as allreduce
//   alltoall                  | local_max_bytes > 0 (the local engine  | any
//                             | compares the largest input of any rank)|
//   barrier                   | local_max_bytes > 0                    | -
//   reduce, gather, scatter,  | never                                  | -
//   allreduce_coalesced       |                                        |
//
// and the tensors are on the CPU. Where the ranks are decides the rest: the local engine's first op sets
// it up collectively and finds whether every rank is on this host; if not, it declines every op, on every
// rank alike, and the network engine runs them. It also declines an allreduce whose buffers are not all
// in the pool and above local_max_bytes, and an alltoall whose largest input is.
//
// Overrides, per group (BackendOptions) or per process (environment, read when the group is created):
//   local engine on or off        BackendOptions::shared_memory,          BRAID_SHM=0
//   local_max_bytes               BackendOptions::shared_staging_max_bytes, BRAID_SHM_STAGING_MAX_BYTES
//                                 (default: by network engine, below)
//   pool_min_bytes                BackendOptions::shared_memory_min_bytes,  BRAID_SHM_ALLREDUCE_MIN_BYTES (64K)
//   pool_bytes (empty_shared)     BRAID_SHM_POOL_BYTES (4G; 0: no pool)
//
// Two levels. On a group whose ranks span hosts with more than one rank on some host, the factory adds a
// third engine, the two-level one (hier/: each host's ranks through shared memory, the hosts through the
// network engine), and it runs these first, before the table above is asked:
//
//   op                        | size                                   | layout
//   --------------------------+----------------------------------------+-----------------------------------
//   allreduce                 | bytes >= hier_min_bytes, > 0           | any (every host the same number of
//                             |                                        | ranks: by slices; else by leaders)
//   broadcast                 | bytes >= hier_min_bytes, > 0           | any
//   allgather (the output),   | bytes >= hier_min_bytes, > 0           | every host the same number of
//   reduce_scatter (input)    |                                        | ranks (else it declines)
//
// with every dtype and reduce op the network engine reduces, on the CPU.
//   two levels on or off          BackendOptions::hierarchy,              BRAID_HIERARCHY=0
//   hier_min_bytes                BackendOptions::hierarchy_min_bytes,    BRAID_HIERARCHY_MIN_BYTES (0)
// Every rank must resolve the same values. Each decision is written to the "braid.collectives" logger at
// debug level (BRAID_LOG_LEVEL=warn,braid.collectives=debug), with the op, its size and the reason.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "collectives/core/backend_options.h"
#include "collectives/core/engine.h"

namespace braid::collectives {

enum class OpKind : uint8_t {
  Broadcast,
  Allreduce,
  AllreduceCoalesced,
  Reduce,
  Allgather,
  Gather,
  Scatter,
  ReduceScatter,
  Alltoall,
  Barrier,
};

// What the policy looks at.
struct OpTraits {
  OpKind kind;
  int64_t bytes = 0;  // see the table above for which buffer
  DType dtype = DType::Float32;
  EngineOp op = EngineOp::SUM;  // reductions only
  Device device = Device::cpu();
};

struct EnginePolicy {
  // The largest op the local engine takes when the network engine is `network` ("gloo": no limit, as
  // shared memory beat gloo's TCP loopback at every size; "mpi": 1 MiB, above which Open MPI's own
  // single-copy transport wins broadcast, allgather and alltoall; anything else: 0, no local engine).
  static int64_t default_local_max_bytes(std::string_view network);
  // The values for a group of `network` created with `options`, with the environment's overrides.
  static EnginePolicy resolve(std::string_view network, const BackendOptions& options);

  bool local_enabled = true;
  int64_t local_max_bytes = 0;
  int64_t pool_min_bytes = 64 * 1024;
  int64_t pool_bytes = int64_t{4} << 30;

  bool hier_enabled = true;
  int64_t hier_min_bytes = 0;

  // Whether `hier` (the two-level engine; may be null) runs the op first; `why` as below.
  bool hier_first(const OpTraits& op, const Engine* hier, std::string* why = nullptr) const;
  // Whether `local` (may be null) runs the op first; `why` (may be null) gets the reason, for the log.
  bool local_first(const OpTraits& op, const Engine* local, std::string* why = nullptr) const;
  // "local engine on, local_max_bytes=1048576, pool_min_bytes=65536, pool_bytes=4294967296"
  std::string describe() const;
};

std::string_view op_kind_name(OpKind kind);

}  // namespace braid::collectives
