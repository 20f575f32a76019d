// The user header of braid's UCX active messages (private to rpc/ucx/; the tests inject raw ones).
//
// A frame (rpc/wire.h) travels as one active message with id kFrameAmId:
//   AM header = envelope (32 bytes) [+ stream token (32)] [+ frame prefix: 32-byte frame header, tensor
//               table, meta]
//   AM data   = [frame prefix when it did not fit the header] + the tensors' bytes, in table order
// The prefix rides in the header whenever it fits the worker's max_am_header (8 KiB with UCX 1.13's
// shared-memory and tcp transports): the receiver then knows the tensors before the data arrives and a
// rendezvous lands straight in their storage. A larger prefix (a meta of many KiB) goes in front of the
// data instead, and the receiver copies the payloads out of a staging buffer.
//
// Envelope, little-endian:
//   offset size  field
//   0      4     magic "BUCX"
//   4      1     version (2; 1 had no stream token)
//   5      1     flags: bit 0 = the frame prefix follows in the header;
//                       bit 1 = a stream token (security/stream_token.h) follows the envelope
//   6      2     reserved, 0
//   8      4     sender worker id (>= 0)
//   12     4     frame prefix bytes (32 + table + meta)
//   16     8     stream: the sender's id for its current connection to this receiver (64 random bits; a
//                new one after the sender's endpoint failed or the receiver reset the stream)
//   24     8     sequence number of the message in that stream, from 0
//
// The first message of every stream (sequence number 0), and only it, carries the stream token: the
// sender's proof of the job secret, bound to both workers' ids and nonces and to the stream. The receiver
// reads nothing past the envelope of a stream it has not authenticated (ucx_receiver.h).
//
// A reset (id kResetAmId) tells a sender that the receiver dropped its stream: header = envelope with
// flags 0, prefix bytes 0 and the dropped stream; data = the reason, as text. Only authenticated streams
// are ever reset.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "rpc/wire.h"
#include "security/handshake.h"

namespace braid::rpc::ucx_detail {

inline constexpr unsigned kFrameAmId = 0x42;  // "B"
inline constexpr unsigned kResetAmId = 0x43;
inline constexpr uint32_t kEnvelopeMagic = 0x58435542;  // "BUCX" little-endian
inline constexpr uint8_t kEnvelopeVersion = 2;
inline constexpr size_t kEnvelopeBytes = 32;
inline constexpr uint8_t kPrefixInHeader = 1;
inline constexpr uint8_t kHasStreamToken = 2;
inline constexpr size_t kStreamTokenBytes = security::kMacBytes;

struct Envelope {
  uint8_t flags = 0;
  int32_t sender = -1;
  uint32_t prefix_bytes = 0;
  uint64_t stream = 0;
  uint64_t seq = 0;

  bool prefix_in_header() const { return (flags & kPrefixInHeader) != 0; }
  bool has_token() const { return (flags & kHasStreamToken) != 0; }
  // Where the frame prefix starts in the header (when it is there): after the envelope and the token.
  size_t fixed_header_bytes() const { return kEnvelopeBytes + (has_token() ? kStreamTokenBytes : 0); }
};

void encode_envelope(const Envelope& env, uint8_t* out);
// Validates the fixed fields (WireError naming the field): length, magic, version, flags, reserved and
// sender.
Envelope decode_envelope(std::span<const uint8_t> bytes);
// For a frame: the prefix length is at least a frame header and at most what `limits` allow for header +
// table + meta, and the stream token is there exactly on message 0. The caller checks the lengths against
// the AM the envelope arrived in.
void check_frame_envelope(const Envelope& env, const WireLimits& limits);

}  // namespace braid::rpc::ucx_detail
