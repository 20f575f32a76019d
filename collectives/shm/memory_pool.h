// MemoryPool: one POSIX shared-memory segment per rank of a group, every segment mapped by every
// rank on the host, so that a collective over buffers allocated here can read and write the other ranks'
// buffers directly (pool_allreduce.h) instead of copying them through the engine.
//
// Setup is collective over the group, through its store: each rank creates its segment (a sparse file in
// /dev/shm of `reserve_bytes`), publishes its host, the segment's name and its process id, maps every
// peer's segment, and reports whether that worked; the segment names are unlinked as soon as everyone mapped them, so nothing is left
// in /dev/shm when the processes exit. Every rank reaches the same verdict: either all have a pool or
// none does (ranks on several hosts, a full /dev/shm, a container that hides the peers' segments).
//
// A segment starts with a control page (one ControlSlot per lane, written only by its owner) followed by
// blocks handed out by allocate(). Blocks are reserved in the file when first carved (fallocate), so a
// full /dev/shm makes allocate() return null instead of faulting later; freed blocks are kept by size
// and handed out again (the pool never shrinks; it lives as long as the group or its last block).
//
// Thread-safety: allocate/deallocate/offset_of may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "store/store.h"

namespace braid::collectives::shm {

class MemoryPool {
 public:
  // Lanes with a control slot: collectives on a higher lane do not use the pool.
  static constexpr int kMaxLanes = 16;
  // The control page at the start of every segment; blocks follow it.
  static constexpr size_t kControlBytes = 4096;

  // What a rank publishes for one shared-memory collective on one lane (see pool_allreduce.cc).
  struct alignas(64) ControlSlot {
    std::atomic<uint64_t> arrived{0};  // 2 * generation + phase, written last
    int64_t offset = -1;               // the buffer's offset in the owner's segment, -1: not in the pool
    int64_t bytes = 0;
  };

  // Collective over the group's `size` ranks. Returns null on every rank when any rank cannot share.
  static std::shared_ptr<MemoryPool> create(store::Store& store, const std::string& prefix, int rank, int size,
                                                  size_t reserve_bytes, Millis timeout);
  ~MemoryPool();
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(segments_.size()); }

  // `nbytes` (64-byte aligned) in this rank's segment, or null when the segment or /dev/shm is full.
  void* allocate(size_t nbytes);
  void deallocate(void* p, size_t nbytes);
  // Offset of [p, p + nbytes) in this rank's segment, or -1 when it is not inside the segment's blocks.
  int64_t offset_of(const void* p, size_t nbytes) const;

  char* segment(int rank) const { return segments_[rank]; }
  // Whether `rank`'s process is known to have exited, or to be an unreaped zombie (process_exited.h):
  // false while it runs, and when this rank cannot tell (another PID namespace). Lets a wait on a peer
  // that died end at once instead of at its deadline.
  bool exited(int rank) const;
  int pid(int rank) const { return pids_[static_cast<size_t>(rank)]; }
  ControlSlot& slot(int rank, int lane) const;
  // How many shared-memory collectives this rank has run on `lane` (used by whoever runs the lane's ops,
  // one at a time).
  uint64_t& generation(int lane) { return generations_[lane]; }

 private:
  MemoryPool(int rank, size_t reserve_bytes, int own_fd, std::vector<char*> segments, std::vector<int> pids);
  static size_t block_size(size_t nbytes);

  int rank_;
  size_t reserve_;
  int own_fd_;
  std::vector<char*> segments_;  // every rank's mapping, this rank's included
  std::vector<int> pids_;        // every rank's process id in this PID namespace, 0 when unknown
  uint64_t generations_[kMaxLanes] = {};

  mutable std::mutex mu_;
  size_t next_ = 0;                                      // GUARDED_BY(mu_): first never-carved byte
  std::map<size_t, std::vector<size_t>> free_offsets_;  // GUARDED_BY(mu_): freed blocks by size
};

}  // namespace braid::collectives::shm
