// The RPC wire format: one message is one frame.
//
//   offset size  field
//   0      4     magic "BRPC"
//   4      1     format version (2)
//   5      1     message type (MessageType, 1..10)
//   6      2     extension bytes (Message::ext: what a layer above RPC attaches, rpc/call_hooks.h)
//   8      8     request id
//   16     4     tensor table bytes
//   20     4     meta bytes
//   24     8     tensor payload bytes (the sum of every tensor's numel * element size)
//   32     ...   tensor table: per tensor  dtype u8, ndim u8 (<= 64), flags u8 (bit 0: requires grad),
//                reserved u8 (0), then ndim int64 sizes (>= 0)
//   ...          extension (distributed autograd's context and message ids; usually empty)
//   ...          meta (the agent's encoding, rpc/agent_protocol.h)
//   ...          tensor payloads, back to back, row-major, in table order
//
// Every length is checked against WireLimits before anything is allocated, and the table against the
// header (its entries must fill it exactly and their payloads must add up to the payload length); a
// violation throws WireError naming the field, and the transport closes that connection. All integers
// are little-endian.
//
// Sending gathers: frame_prefix() builds header + table + meta in a reusable buffer and payload_spans()
// points at the tensors' own storage, so a transport writes tensor bytes without copying them. Receiving
// scatters: decode_header() validates the fixed part, decode_body() allocates the tensors (from the caching
// allocator) and receive_spans() returns where their bytes go.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.h"
#include "rpc/message.h"

namespace braid::rpc {

inline constexpr uint32_t kWireMagic = 0x43505242;  // "BRPC" little-endian
inline constexpr uint8_t kWireVersion = 2;
inline constexpr size_t kFrameHeaderBytes = 32;
inline constexpr int kMaxTensorDims = 64;

struct WireLimits {
  uint64_t max_payload_bytes = uint64_t{4} << 30;  // tensor bytes per message (4 GiB)
  uint32_t max_meta_bytes = 64u << 20;              // 64 MiB
  uint32_t max_table_bytes = 16u << 20;             // 16 MiB (about 30,000 tensors of 64 dims)
};

// A malformed frame: the message names the field and the values.
class WireError : public Error {
 public:
  using Error::Error;
};

struct FrameHeader {
  MessageType type = MessageType::kCall;
  uint64_t id = 0;
  uint32_t table_bytes = 0;
  uint16_t ext_bytes = 0;
  uint32_t meta_bytes = 0;
  uint64_t payload_bytes = 0;

  // Bytes after the fixed header and before the payloads.
  size_t body_bytes() const { return size_t{table_bytes} + ext_bytes + meta_bytes; }
};

// Header + table + meta of `msg`, written into `out` (cleared first; its capacity is reused). Tensors must
// be contiguous CPU tensors (WireError otherwise: the agent makes them so).
void frame_prefix(const Message& msg, std::vector<uint8_t>& out);
// Each tensor's bytes, in table order (empty tensors give no span).
std::vector<std::span<const uint8_t>> payload_spans(const Message& msg);
// The header of `msg` alone (frame_prefix's first 32 bytes).
FrameHeader header_of(const Message& msg);

// Validates and parses the fixed header.
FrameHeader decode_header(std::span<const uint8_t> bytes, const WireLimits& limits);
// Parses table + extension + meta (`body`, exactly header.body_bytes() long) into a message whose tensors are
// allocated but not yet filled.
Message decode_body(const FrameHeader& header, std::span<const uint8_t> body);
// Where each tensor's bytes go (empty tensors give no span).
std::vector<std::span<uint8_t>> receive_spans(const Message& msg);

}  // namespace braid::rpc
