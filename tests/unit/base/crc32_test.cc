// base/crc32.h: the same CRC-32 as zlib's (an independent bitwise reference here), however the bytes are
// split, and the CRC of a concatenation from its parts' CRCs.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/crc32.h"

namespace braid {
namespace {

// Bit by bit: the reflected polynomial 0xEDB88320 with pre- and post-inversion (zlib's crc32).
uint32_t reference_crc32(const uint8_t* p, size_t n) {
  uint32_t crc = ~0u;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

}  // namespace

TEST_CASE("crc32: zlib's CRC-32 at every length and split", "[base][crc32]") {
  INFO("implementation " << crc32_implementation());
  const std::string check = "123456789";
  CHECK(crc32_update(0, check.data(), check.size()) == 0xCBF43926u);  // the CRC-32 check value
  CHECK(crc32_update(0, nullptr, 0) == 0);
  std::mt19937_64 rng(5);
  std::vector<uint8_t> bytes(5000);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  for (size_t n : {1, 7, 15, 16, 17, 63, 64, 65, 255, 256, 1023, 4096, 5000}) {
    INFO(n << " bytes");
    const uint32_t want = reference_crc32(bytes.data(), n);
    CHECK(crc32_update(0, bytes.data(), n) == want);
    for (size_t cut : {size_t{0}, size_t{1}, n / 3, n - 1}) {
      const uint32_t a = crc32_update(0, bytes.data(), cut);
      CHECK(crc32_update(a, bytes.data() + cut, n - cut) == want);
      CHECK(crc32_concat(a, crc32_update(0, bytes.data() + cut, n - cut), n - cut) == want);
    }
  }
}

}  // namespace braid
