// Broadcast through shared memory, for groups whose ranks are all on one host: the root copies its tensor,
// a chunk at a time, into staging blocks of its own segment and publishes each chunk; every other rank
// copies it out. One copy in and one copy out per rank and no socket: on 4 ranks over 2 cores a 4 KiB
// broadcast took ~80 µs through gloo's binomial tree over TCP loopback and ~15 µs here
// (docs/PERFORMANCE.md has the measurements).
//
// SharedStaging is a small SharedMemoryPool (its own segments, not the empty_shared pool) holding two
// staging blocks per lane. Each block starts with a 64-byte header (the whole message's size, which
// readers check against their own) and holds one chunk of up to kStagingChunkBytes (256 KiB - 64). Every
// rank carves the blocks in the same order from a fresh pool, so a block has the same offset in every
// rank's segment.
//
// Protocol for the g-th chunk on a lane (g counts per lane, the same on every rank because a lane runs its
// ops in the same order everywhere and ranks agree on the size), using block g % 2 of the root's segment:
//   root:   wait until every rank finished chunk g-2 (the last one to use this block: ranks finish a
//           lane's chunks in order), copy the header and the chunk in, then publish arrived = g;
//   others: wait until the root's arrived >= g, check the size, copy the chunk out, publish arrived = g.
// While readers copy chunk g out, the root copies chunk g+1 in: the two blocks make a pipeline. The root
// does not wait for the readers of its last chunks; the next op on the lane that uses the block does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "collectives/queued_process_group.h"
#include "collectives/shared_memory_pool.h"
#include "store/store.h"

namespace braid::collectives {

// A staging block: the header, then a chunk of data. Blocks of 256 KiB stay in L2 on the way through
// (two per lane and rank: 1 MiB of /dev/shm per rank for gloo's two lanes).
inline constexpr size_t kStagingBlockBytes = 256 * 1024;
inline constexpr size_t kStagingHeaderBytes = 64;
inline constexpr size_t kStagingChunkBytes = kStagingBlockBytes - kStagingHeaderBytes;

class SharedStaging {
 public:
  // Collective over the group's `size` ranks, like SharedMemoryPool::create: null on every rank when any
  // rank cannot share memory with the others or reserve its blocks. Lanes beyond
  // SharedMemoryPool::kMaxLanes get no blocks.
  static std::unique_ptr<SharedStaging> create(store::Store& store, const std::string& prefix, int rank, int size,
                                               int lanes, Millis timeout);

  int lanes() const { return lanes_; }
  size_t chunk_bytes() const { return kStagingChunkBytes; }
  SharedMemoryPool& pool() { return *pool_; }
  // Block `parity` (0 or 1) of `lane` in `rank`'s segment: the header, then the chunk.
  char* block(int rank, int lane, int parity) const;

 private:
  SharedStaging(std::shared_ptr<SharedMemoryPool> pool, int lanes, std::vector<size_t> offsets);

  std::shared_ptr<SharedMemoryPool> pool_;
  int lanes_;
  std::vector<size_t> offsets_;  // lane * 2 + parity -> offset in every rank's segment
};

// Broadcasts `buffer` (contiguous, CPU, not empty) from `root` on ctx.lane, which must be below staging.lanes().
// Throws TimeoutError naming the ranks that did not come by ctx.deadline, and CommError when the root's
// message has another size than this rank's buffer.
void shared_broadcast(SharedStaging& staging, Tensor& buffer, int root, const OpContext& ctx);

}  // namespace braid::collectives
