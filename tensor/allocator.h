// Memory for tensor storages.
//
// The CPU allocator caches freed blocks by rounded size and hands them out again: touching a fresh page
// costs far more than the arithmetic on it on the machines braid targets, so hot paths (collective buffers,
// RPC payloads, DDP buckets, op outputs) must reuse memory. Blocks are 64-byte aligned. The cache holds at
// most BRAID_CPU_CACHE_BYTES (default 4 GiB) of free blocks; beyond that, freed blocks go back to the OS.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace braid {

struct AllocatorStats {
  size_t allocated_bytes = 0;  // handed out and not yet returned (rounded sizes)
  size_t cached_bytes = 0;     // free blocks held for reuse
  uint64_t hits = 0;           // allocations served from the cache
  uint64_t misses = 0;         // allocations that went to the OS
};

class CpuAllocator {
 public:
  static CpuAllocator& instance();

  // At least `nbytes` bytes (a zero-byte request still returns a unique non-null block).
  void* allocate(size_t nbytes);
  // Returns a block from allocate(); `nbytes` must be the size it was allocated with.
  void deallocate(void* ptr, size_t nbytes);
  // Frees every cached block.
  void empty_cache();
  AllocatorStats stats() const;

  // The size a request is served with; exposed for tests.
  static size_t round_size(size_t nbytes);

  CpuAllocator(const CpuAllocator&) = delete;
  CpuAllocator& operator=(const CpuAllocator&) = delete;

 private:
  explicit CpuAllocator(size_t cache_limit);
  ~CpuAllocator();

  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_blocks_;  // GUARDED_BY(mu_), keyed by rounded size
  size_t cache_limit_;
  AllocatorStats stats_;  // GUARDED_BY(mu_)
};

}  // namespace braid
