// BackendOptions: what creating a process group takes, whichever engine runs it. The registry
// (registry/engine_factory.h) reads the engine's name and passes these on; each engine reads its part.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/core/options.h"
#include "store/store.h"

namespace braid::collectives {

struct BackendOptions {
  // The group's rank and size, and a name unique in the job ("world", "group-3", ...). Engines use the
  // name in messages and as the namespace of their store keys.
  int rank = 0;
  int size = 1;
  std::string group_name = "world";
  // Shared by every member; gloo and nccl bootstrap through it; every backend uses it for the
  // missing-ranks report, monitored_barrier and BRAID_DEBUG=DETAIL. Already prefixed per group.
  std::shared_ptr<store::Store> store;
  Millis timeout = kDefaultCollectiveTimeout;
  // Members' ranks in MPI_COMM_WORLD, in group-rank order (mpi builds a sub-communicator from them);
  // empty means the whole world.
  std::vector<int> global_ranks;
  // gloo: worker lanes (torch's `threads`, default 2) and the network interfaces to use, round-robin
  // over ops (default: the interface toward the store's host, "lo" on one host; gloo_devices.h).
  int threads = 2;
  std::vector<std::string> devices;
  // mpi: allreduces of more bytes than this run as consecutive MPI_Iallreduce calls on chunks of at most
  // this size (rounded down to whole elements, at least one), inside the one op; 0 turns chunking off.
  // Unset: BRAID_MPI_ALLREDUCE_CHUNK_BYTES (a size such as "16M"), else 16 MiB (docs/CONFIG.md).
  std::optional<int64_t> mpi_allreduce_chunk_bytes;
  // mpi and gloo: an allreduce of at least this many bytes whose buffers come from the group's
  // shared-memory pool (ProcessGroup::empty_shared) reduces through it. Unset: BRAID_SHM_ALLREDUCE_MIN_BYTES,
  // else 64 KiB (docs/CONFIG.md).
  std::optional<int64_t> shared_memory_min_bytes;
  // A CPU broadcast, allgather (its output), alltoall (the largest input of any rank), barrier, and
  // reduce_scatter or allreduce (SUM, AVG, PREMUL_SUM; float32, float64; for the allreduce, of a buffer not
  // in the pool) of at most this many bytes, on a group whose ranks are all on this host, goes through
  // shared-memory staging (collectives/shm/exchange_area.h) instead of the engine; 0 turns that off. Unset:
  // BRAID_SHM_STAGING_MAX_BYTES, else no limit for gloo and 1 MiB for mpi (docs/CONFIG.md). Must be the
  // same on every rank.
  std::optional<int64_t> shared_staging_max_bytes;
  // mpi and gloo: whether the shared-memory engine (shm/) may take ops at all; false leaves every op to
  // the network engine. Unset: BRAID_SHM ("0" turns it off), else on.
  std::optional<bool> shared_memory;
  // nccl: the CUDA device of this rank (-1: local rank modulo the device count).
  int cuda_device = -1;
  // The stall watchdog warns about an op that runs longer than this (0: off). Unset: BRAID_STALL_WARN_S,
  // else 60 s (collectives/queue/health_monitor.h).
  std::optional<Millis> stall_warn;
  // The flight recorder's ring (0: off; unset: BRAID_TRACE_BUFFER_SIZE, else 2000) and the desync
  // fingerprint check (unset: BRAID_DEBUG=DETAIL). `braid bench trace` sets them to compare.
  std::optional<size_t> trace_buffer_size;
  std::optional<bool> desync_check;
};

}  // namespace braid::collectives
