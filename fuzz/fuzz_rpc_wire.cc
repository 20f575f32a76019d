// RPC frames (rpc/wire.h), as a transport receives them: decode_header() on the first 32 bytes, then
// decode_body() on the table + extension + meta, then the tensors' bytes into receive_spans().
//
// The limits are those of a receiver configured small (the defaults allow 4 GiB of payload, which the
// decoder would rightly allocate for a frame that claims it). An accepted frame must frame back to the same
// prefix with frame_prefix(): the encoding of a message is unique.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "rpc/wire.h"

namespace {

namespace rpc = braid::rpc;

rpc::WireLimits small_limits() {
  rpc::WireLimits limits;
  limits.max_payload_bytes = 1u << 20;
  limits.max_meta_bytes = 64u << 10;
  limits.max_table_bytes = 64u << 10;
  return limits;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> input(data, size);
  rpc::FrameHeader header;
  if (!braid::fuzz::accepts([&] { header = rpc::decode_header(input, small_limits()); })) return 0;
  const auto rest = input.subspan(rpc::kFrameHeaderBytes);
  if (rest.size() < header.body_bytes()) return 0;  // a transport would wait for more bytes
  rpc::Message msg;
  if (!braid::fuzz::accepts([&] { msg = rpc::decode_body(header, rest.first(header.body_bytes())); })) return 0;

  // The payload: whatever input is left, then zeros (a transport fills every span before delivering).
  auto payload = rest.subspan(header.body_bytes());
  uint64_t filled = 0;
  for (auto span : rpc::receive_spans(msg)) {
    const size_t n = std::min(span.size(), payload.size());
    std::memcpy(span.data(), payload.data(), n);
    std::memset(span.data() + n, 0, span.size() - n);
    payload = payload.subspan(n);
    filled += span.size();
  }
  if (filled != header.payload_bytes) braid::fuzz::fail("fuzz_rpc_wire", "receive_spans() do not cover the payload");

  std::vector<uint8_t> prefix;
  rpc::frame_prefix(msg, prefix);
  const auto original = input.first(rpc::kFrameHeaderBytes + header.body_bytes());
  if (!std::equal(prefix.begin(), prefix.end(), original.begin(), original.end())) {
    braid::fuzz::fail("fuzz_rpc_wire", "decode/frame_prefix round trip differs");
  }
  return 0;
}
