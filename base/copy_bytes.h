// copy_bytes: memcpy for buffers of any size, in pieces of at most kCopyPieceBytes.
//
// glibc's memcpy copies with `rep movsb` up to its rep_movsb_stop_threshold (the L2 size on AMD Zen: 1 MiB
// on this project's VM) and with a vector loop above it, which was the slower of the two here wherever the
// data came from memory rather than cache. An 8 MiB own-block copy inside a 16 MiB two-rank exchange took
// about 50 µs longer as one call than in pieces: a plain Irecv/Isend exchange plus one memcpy ran 1.13-1.19x
// MPI_Alltoall's time, the same exchange copying in pieces of 64-512 KiB 0.97-1.02x, in pieces of 1 MiB
// 1.09-1.18x again (docs/PERFORMANCE.md, "Large copies in pieces"). Open MPI's own datatype copy goes in
// 128 KiB pieces, which is why its collectives did not pay it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace braid {

inline constexpr size_t kCopyPieceBytes = 256 * 1024;

inline void copy_bytes(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  for (size_t done = 0; done < bytes; done += kCopyPieceBytes) {
    std::memcpy(d + done, s + done, std::min(kCopyPieceBytes, bytes - done));
  }
}

}  // namespace braid
