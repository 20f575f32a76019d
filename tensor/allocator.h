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
  size_t external_bytes = 0;   // tensor memory mapped outside the allocator, as its owners report it
  // The most allocated_bytes + external_bytes reached since the process started or reset_peak().
  size_t peak_bytes = 0;
  size_t cached_bytes = 0;     // free blocks held for reuse
  uint64_t hits = 0;           // allocations served from the cache
  uint64_t misses = 0;         // allocations that went to the OS
};

class CpuAllocator {
 public:
  static CpuAllocator& instance();

  // At least `nbytes` bytes (a zero-byte request still returns a unique non-null block). OutOfMemoryError
  // naming the size when the system has none left (after the cache was given back and the call retried).
  void* allocate(size_t nbytes);
  // Returns a block from allocate(); `nbytes` must be the size it was allocated with.
  void deallocate(void* ptr, size_t nbytes);
  // Frees every cached block.
  void empty_cache();
  AllocatorStats stats() const;
  // Tensor memory that does not come from here but should count in the stats and the peak: a storage
  // with a mapping of its own reports the bytes it holds resident (+) and gives back (-).
  void note_external(int64_t delta_bytes);
  // Starts a new peak from what is held now (as torch.cuda.reset_peak_memory_stats).
  void reset_peak();

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
  void add_held(size_t bytes);  // requires mu_
  void update_peak();           // requires mu_
  AllocatorStats stats_;  // GUARDED_BY(mu_)
};

}  // namespace braid
