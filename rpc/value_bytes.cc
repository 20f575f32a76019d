#include "rpc/value_bytes.h"

#include <cstring>

#include "rpc/value_codec.h"

namespace braid::rpc {

std::vector<uint8_t> value_to_bytes(const Value& value) {
  Message msg;
  msg.type = MessageType::kResult;
  MetaWriter meta(msg.meta);
  encode_value(value, meta, msg.tensors, nullptr);
  std::vector<uint8_t> out;
  frame_prefix(msg, out);
  for (const auto& span : payload_spans(msg)) out.insert(out.end(), span.begin(), span.end());
  return out;
}

Value value_from_bytes(std::span<const uint8_t> bytes, const WireLimits& limits) {
  if (bytes.size() < kFrameHeaderBytes) {
    BRAID_THROW(WireError, "value bytes: {} bytes, shorter than the {}-byte frame header", bytes.size(),
                kFrameHeaderBytes);
  }
  const FrameHeader header = decode_header(bytes.first(kFrameHeaderBytes), limits);
  const std::span<const uint8_t> rest = bytes.subspan(kFrameHeaderBytes);
  if (rest.size() < header.body_bytes() || rest.size() - header.body_bytes() != header.payload_bytes) {
    BRAID_THROW(WireError, "value bytes: the header announces {} body and {} payload bytes, but {} bytes follow it",
                header.body_bytes(), header.payload_bytes, rest.size());
  }
  Message msg = decode_body(header, rest.first(header.body_bytes()));
  size_t at = header.body_bytes();
  for (const auto& span : receive_spans(msg)) {
    std::memcpy(span.data(), rest.data() + at, span.size());  // decode_body matched the spans to payload_bytes
    at += span.size();
  }
  MetaReader reader(msg.meta);
  Value value = decode_value(reader, msg.tensors, nullptr);
  reader.expect_end("the value");
  return value;
}

}  // namespace braid::rpc
