// StagingArea: a small MemoryPool per group (its own segments, not the empty_shared pool) holding
// two staging blocks per lane and rank, through which the collectives of ordinary CPU buffers go on
// groups whose ranks share a host: broadcast (broadcast.h) and allreduce (allreduce.h).
//
// Each block starts with a 64-byte header (the whole message's size, which the ranks check against
// their own) and holds one chunk of up to kStagingChunkBytes (256 KiB - 64). Every rank carves the blocks
// in the same order from a fresh pool, so a block has the same offset in every rank's segment.
//
// The ops take turns on a lane's blocks by generation: the g-th chunk moved on a lane (every rank counts
// the same, because a lane runs its ops in the same order everywhere and the ranks agree on the sizes)
// uses block g % 2, and each rank publishes its progress through chunk g in its control slot for the
// lane as one of three values (below), never going back. A rank writes a block again (chunk g + 2) only
// once every rank is done with chunk g, so while the others finish one chunk it can fill the next: the
// two blocks make a pipeline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "collectives/shm/memory_pool.h"
#include "store/store.h"

namespace braid::collectives::shm {

// A staging block: the header, then a chunk of data. Blocks of 256 KiB stay in L2 on the way through
// (two per lane and rank: 1 MiB of /dev/shm per rank for gloo's two lanes).
inline constexpr size_t kStagingBlockBytes = 256 * 1024;
inline constexpr size_t kStagingHeaderBytes = 64;
inline constexpr size_t kStagingChunkBytes = kStagingBlockBytes - kStagingHeaderBytes;

// A rank's progress through chunk g, as published in its control slot: its data is in its block, its
// share of a reduction is written, it is done with every block it reads or writes for the chunk.
inline constexpr uint64_t staged_data_in(uint64_t g) { return 3 * g - 2; }
inline constexpr uint64_t staged_reduced(uint64_t g) { return 3 * g - 1; }
inline constexpr uint64_t staged_done(uint64_t g) { return 3 * g; }

class StagingArea {
 public:
  // Collective over the group's `size` ranks, like MemoryPool::create: null on every rank when any
  // rank cannot share memory with the others or reserve its blocks. Lanes beyond
  // MemoryPool::kMaxLanes get no blocks.
  static std::unique_ptr<StagingArea> create(store::Store& store, const std::string& prefix, int rank, int size,
                                               int lanes, Millis timeout);

  int lanes() const { return lanes_; }
  size_t chunk_bytes() const { return kStagingChunkBytes; }
  MemoryPool& pool() { return *pool_; }
  // Block `parity` (0 or 1) of `lane` in `rank`'s segment: the header, then the chunk.
  char* block(int rank, int lane, int parity) const;

 private:
  StagingArea(std::shared_ptr<MemoryPool> pool, int lanes, std::vector<size_t> offsets);

  std::shared_ptr<MemoryPool> pool_;
  int lanes_;
  std::vector<size_t> offsets_;  // lane * 2 + parity -> offset in every rank's segment
};

}  // namespace braid::collectives::shm
