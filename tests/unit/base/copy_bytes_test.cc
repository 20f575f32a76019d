// base/copy_bytes.h: every byte arrives, for sizes around the piece size and unaligned ends.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "base/copy_bytes.h"

namespace braid {
namespace {

TEST_CASE("copy_bytes: sizes around the piece size, at unaligned offsets", "[base][copy]") {
  constexpr size_t kPiece = kCopyPieceBytes;
  for (size_t bytes : {size_t{0}, size_t{1}, kPiece - 1, kPiece, kPiece + 1, 3 * kPiece + 5}) {
    for (size_t offset : {size_t{0}, size_t{3}}) {
      INFO(bytes << " bytes at offset " << offset);
      std::vector<uint8_t> src(bytes + offset), dst(bytes + 2 * offset + 1, 0xee);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + (i >> 16));
      copy_bytes(dst.data() + offset, src.data() + offset, bytes);
      size_t wrong = 0;
      for (size_t i = 0; i < bytes; ++i) wrong += dst[offset + i] != src[offset + i];
      CHECK(wrong == 0);
      // Nothing written before or after the range.
      for (size_t i = 0; i < offset; ++i) CHECK(dst[i] == 0xee);
      for (size_t i = offset + bytes; i < dst.size(); ++i) CHECK(dst[i] == 0xee);
    }
  }
}

}  // namespace
}  // namespace braid
