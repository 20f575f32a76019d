// CRC-32 (the polynomial of zlib, gzip and PNG, reflected): the checksums of braid's files and of tensors
// on the wire. Intel ISA-L's crc32_gzip_refl (carry-less multiplication, ~25 GB/s on this machine) where
// the build has it (BRAID_HAVE_ISAL), zlib's crc32 (~4 GB/s) otherwise; both give the same values, so
// files and messages do not depend on which one a build has.
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid {

// The CRC of `n` bytes at `data`, continuing from `crc` (0 to start):
// crc32_update(crc32_update(0, a), b) == crc32_update(0, a followed by b).
uint32_t crc32_update(uint32_t crc, const void* data, size_t n);
// The CRC of A followed by B, from A's CRC, B's CRC and B's length (zlib's crc32_combine): a file's CRC
// from the CRCs its parts already carry, without reading them again.
uint32_t crc32_concat(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);
// Which implementation this build uses: "ISA-L" or "zlib".
const char* crc32_implementation();

}  // namespace braid
