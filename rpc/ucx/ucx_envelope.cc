#include "rpc/ucx/ucx_envelope.h"

#include <cstring>

#include "base/check.h"

namespace braid::rpc::ucx_detail {

namespace {

template <class T>
void put(uint8_t* out, size_t at, T v) {
  std::memcpy(out + at, &v, sizeof(T));  // little-endian host (rpc/wire.cc asserts it)
}

template <class T>
T get(std::span<const uint8_t> bytes, size_t at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof(T));
  return v;
}

}  // namespace

void encode_envelope(const Envelope& env, uint8_t* out) {
  put<uint32_t>(out, 0, kEnvelopeMagic);
  put<uint8_t>(out, 4, kEnvelopeVersion);
  put<uint8_t>(out, 5, env.flags);
  put<uint16_t>(out, 6, 0);
  put<int32_t>(out, 8, env.sender);
  put<uint32_t>(out, 12, env.prefix_bytes);
  put<uint64_t>(out, 16, env.stream);
  put<uint64_t>(out, 24, env.seq);
}

Envelope decode_envelope(std::span<const uint8_t> bytes) {
  BRAID_CHECK_TYPED(WireError, bytes.size() >= kEnvelopeBytes, "ucx envelope: truncated ({} of {} bytes)",
                    bytes.size(), kEnvelopeBytes);
  const auto magic = get<uint32_t>(bytes, 0);
  BRAID_CHECK_TYPED(WireError, magic == kEnvelopeMagic, "ucx envelope: bad magic 0x{:08x} (expected 0x{:08x}, "
                    "\"BUCX\")", magic, kEnvelopeMagic);
  const auto version = get<uint8_t>(bytes, 4);
  BRAID_CHECK_TYPED(WireError, version == kEnvelopeVersion,
                    "ucx envelope: unsupported version {} (this build speaks {})", version, kEnvelopeVersion);
  Envelope env;
  env.flags = get<uint8_t>(bytes, 5);
  BRAID_CHECK_TYPED(WireError, (env.flags & ~(kPrefixInHeader | kHasStreamToken)) == 0,
                    "ucx envelope: unknown flags 0x{:02x}", env.flags);
  const auto reserved = get<uint16_t>(bytes, 6);
  BRAID_CHECK_TYPED(WireError, reserved == 0, "ucx envelope: reserved field is {} (must be 0)", reserved);
  env.sender = get<int32_t>(bytes, 8);
  BRAID_CHECK_TYPED(WireError, env.sender >= 0, "ucx envelope: invalid sender worker id {}", env.sender);
  env.prefix_bytes = get<uint32_t>(bytes, 12);
  env.stream = get<uint64_t>(bytes, 16);
  env.seq = get<uint64_t>(bytes, 24);
  return env;
}

void check_frame_envelope(const Envelope& env, const WireLimits& limits) {
  const uint64_t max_prefix = uint64_t{kFrameHeaderBytes} + limits.max_table_bytes + limits.max_meta_bytes;
  BRAID_CHECK_TYPED(WireError, env.prefix_bytes >= kFrameHeaderBytes && env.prefix_bytes <= max_prefix,
                    "ucx envelope from worker {}: frame prefix of {} bytes (must be {}..{})", env.sender,
                    env.prefix_bytes, kFrameHeaderBytes, max_prefix);
  BRAID_CHECK_TYPED(WireError, env.has_token() == (env.seq == 0),
                    "ucx envelope from worker {}: message {} of stream {:016x} {} a stream token (the first "
                    "message of a stream carries one, no other does)", env.sender, env.seq, env.stream,
                    env.has_token() ? "carries" : "lacks");
}

}  // namespace braid::rpc::ucx_detail
