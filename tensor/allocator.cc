#include "tensor/allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "base/check.h"
#include "base/env.h"
#include "base/oom_error.h"

namespace braid {
namespace {
constexpr size_t kAlignment = 64;
constexpr size_t kSmall = 4096;
constexpr size_t kLargeGranule = 1u << 20;
constexpr size_t kHugePage = 2u << 20;

// Large blocks are 2 MiB aligned and advised for transparent huge pages (THP "madvise" mode, the common
// default): the first touch of a block then faults once per 2 MiB instead of once per 4 KiB, and GEMMs,
// copies and the MPI engine's shared-memory copies over it walk 512× fewer page-table entries.
// BRAID_CPU_HUGE_PAGES=0 turns it off. Read once.
bool huge_pages_enabled() {
  static const bool on = env::get("BRAID_CPU_HUGE_PAGES").value_or("1") != "0";
  return on;
}

void* allocate_block(size_t size) {
  if (size < kHugePage || !huge_pages_enabled()) return std::aligned_alloc(kAlignment, size);
  void* p = nullptr;
  if (posix_memalign(&p, kHugePage, size) != 0) return nullptr;
  // Advice only: a kernel without THP refuses it (EINVAL) and the block works as ordinary pages.
  if (p != nullptr) (void)madvise(p, size, MADV_HUGEPAGE);
  return p;
}
}  // namespace

CpuAllocator& CpuAllocator::instance() {
  // Leaked on purpose: storages may be released during static destruction.
  static CpuAllocator* a = new CpuAllocator(
      static_cast<size_t>(env::parse_size(env::get("BRAID_CPU_CACHE_BYTES").value_or("4G"), "BRAID_CPU_CACHE_BYTES")));
  return *a;
}

CpuAllocator::CpuAllocator(size_t cache_limit) : cache_limit_(cache_limit) {}

CpuAllocator::~CpuAllocator() { empty_cache(); }

size_t CpuAllocator::round_size(size_t nbytes) {
  if (nbytes <= kSmall) return (std::max<size_t>(nbytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  if (nbytes <= kLargeGranule) {
    size_t p = kSmall;
    while (p < nbytes) p <<= 1;
    return p;
  }
  return (nbytes + kLargeGranule - 1) / kLargeGranule * kLargeGranule;
}

void* CpuAllocator::allocate(size_t nbytes) {
  // No machine has half the address space to give, and rounding a size this large up would wrap it.
  if (nbytes > std::numeric_limits<size_t>::max() / 2) {
    BRAID_THROW(OutOfMemoryError, "CPU allocator: cannot allocate {} bytes: more than the address space holds",
                nbytes);
  }
  const size_t size = round_size(nbytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_blocks_.find(size);
    if (it != free_blocks_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= size;
      add_held(size);
      ++stats_.hits;
      return p;
    }
    ++stats_.misses;
  }
  void* p = allocate_block(size);
  if (p == nullptr) {
    empty_cache();  // retry once with the cache given back
    p = allocate_block(size);
    if (p == nullptr) {
      BRAID_THROW(OutOfMemoryError, "CPU allocator: cannot allocate {} bytes ({:.3g} GiB): out of memory, even "
                  "after returning its cache of freed blocks ({} bytes now held)", size,
                  static_cast<double>(size) / (1u << 30), stats().allocated_bytes);
    }
  }
  // Counted once it is held, so that a failed request leaves no trace in allocated_bytes or the peak.
  std::lock_guard<std::mutex> lock(mu_);
  add_held(size);
  return p;
}

void CpuAllocator::add_held(size_t bytes) {
  stats_.allocated_bytes += bytes;
  update_peak();
}

void CpuAllocator::update_peak() {
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.allocated_bytes + stats_.external_bytes);
}

void CpuAllocator::note_external(int64_t delta_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (delta_bytes < 0) {
    stats_.external_bytes -= std::min(stats_.external_bytes, static_cast<size_t>(-delta_bytes));
    return;
  }
  stats_.external_bytes += static_cast<size_t>(delta_bytes);
  update_peak();
}

void CpuAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_bytes = stats_.allocated_bytes + stats_.external_bytes;
}

void CpuAllocator::deallocate(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  const size_t size = round_size(nbytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.allocated_bytes -= size;
    if (stats_.cached_bytes + size <= cache_limit_) {
      free_blocks_[size].push_back(ptr);
      stats_.cached_bytes += size;
      return;
    }
  }
  std::free(ptr);
}

void CpuAllocator::empty_cache() {
  std::map<size_t, std::vector<void*>> blocks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    blocks.swap(free_blocks_);
    stats_.cached_bytes = 0;
  }
  for (auto& [size, list] : blocks) {
    for (void* p : list) std::free(p);
  }
}

AllocatorStats CpuAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace braid
