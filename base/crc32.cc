#include "base/crc32.h"

#include <zlib.h>

#include <algorithm>

#include "base/config.h"

#if BRAID_HAVE_ISAL
#include <isa-l/crc.h>
#endif

namespace braid {

uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
#if BRAID_HAVE_ISAL
  return ::crc32_gzip_refl(crc, p, n);
#else
  // zlib's crc32 takes a uInt length: large buffers in chunks.
  uLong c = crc;
  while (n > 0) {
    const size_t len = std::min<size_t>(n, size_t{1} << 30);
    c = ::crc32(c, p, static_cast<uInt>(len));
    p += len;
    n -= len;
  }
  return static_cast<uint32_t>(c);
#endif
}

uint32_t crc32_concat(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  return static_cast<uint32_t>(::crc32_combine(crc_a, crc_b, static_cast<z_off_t>(len_b)));
}

const char* crc32_implementation() { return BRAID_HAVE_ISAL ? "ISA-L" : "zlib"; }

}  // namespace braid
