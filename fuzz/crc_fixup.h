// Checksum repair for the checked formats, so that a fuzzer reaches the fields behind a CRC instead of
// stopping at "checksum mismatch" (tensor/serialize.h "BRTN", nn/serialize.h "BRSD"). Each function
// follows the format only as far as it needs to find the checksums and stops, leaving the rest as it is,
// where the bytes stop making sense: the decoder then reports what is wrong.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace braid::fuzz {

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

inline uint32_t crc_of(const uint8_t* p, size_t n, uint32_t crc = 0) {
  return static_cast<uint32_t>(::crc32(crc, p, static_cast<uInt>(n)));
}

// One "BRTN" tensor at the front of p[0, n): rewrites its header and payload CRCs and returns its length,
// or 0 when its header or payload does not fit in n bytes.
inline size_t fix_tensor_crcs(uint8_t* p, size_t n) {
  if (n < 24) return 0;
  const size_t shape_bytes = 8 * size_t{p[7]};
  if (n - 24 < shape_bytes) return 0;
  const uint64_t payload = load_u64(p + 8);
  const size_t header = 24 + shape_bytes;
  if (payload > n - header) return 0;
  const uint32_t payload_crc = crc_of(p + header, static_cast<size_t>(payload));
  std::memcpy(p + 16, &payload_crc, 4);
  const uint32_t header_crc = crc_of(p + 24, shape_bytes, crc_of(p, 20));
  std::memcpy(p + 20, &header_crc, 4);
  return header + static_cast<size_t>(payload);
}

// A "BRSD" state-dict file in p[0, n): each entry's tensor CRCs, then the trailing CRC of the file.
inline void fix_state_dict_crcs(uint8_t* p, size_t n) {
  if (n < 20) return;
  const size_t body = n - 4;
  size_t at = 16;
  for (uint64_t i = 0, count = load_u64(p + 8); i < count && body - at >= 4; ++i) {
    const uint32_t len = load_u32(p + at);
    at += 4;
    if (len > body - at) break;
    at += len;
    const size_t used = fix_tensor_crcs(p + at, body - at);
    if (used == 0) break;
    at += used;
  }
  const uint32_t crc = crc_of(p, body);
  std::memcpy(p + body, &crc, 4);
}

}  // namespace braid::fuzz
