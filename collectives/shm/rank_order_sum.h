// The reduction step of the shared-memory allreduces (pool_allreduce.h over pool buffers,
// allreduce.h over staging blocks): every rank sums its own share of the elements across every
// rank's buffer, in rank order 0..n-1 (so every rank ends with the same bits), and stores the sum into
// every buffer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace braid::collectives::shm {

// Elements per share: a multiple of 16 (one 64-byte line of float32) so shares never split a line.
inline int64_t share_elements(int64_t numel, int ranks) {
  const int64_t per = (numel + ranks - 1) / ranks;
  return (per + 15) / 16 * 16;
}

template <typename T>
void reduce_share(const std::vector<T*>& buffers, int64_t begin, int64_t end) {
  // Sum a block in L1, then store it everywhere: the peers' lines were just read, so the stores hit cache.
  constexpr int64_t kBlock = 2048;
  T acc[kBlock];
  for (int64_t i = begin; i < end; i += kBlock) {
    const int64_t n = std::min(kBlock, end - i);
    std::memcpy(acc, buffers[0] + i, n * sizeof(T));
    for (size_t r = 1; r < buffers.size(); ++r) {
      const T* src = buffers[r] + i;
      for (int64_t k = 0; k < n; ++k) acc[k] += src[k];
    }
    for (T* b : buffers) std::memcpy(b + i, acc, n * sizeof(T));
  }
}

}  // namespace braid::collectives::shm
