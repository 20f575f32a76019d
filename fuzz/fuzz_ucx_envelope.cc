// The UCX envelope (rpc/ucx/ucx_envelope.h): decode_envelope() on the active message's header, then, for a
// frame, check_frame_envelope() against the receiver's limits. An accepted envelope must encode back to
// the same 32 bytes.
#include <array>
#include <cstdint>
#include <cstring>
#include <span>

#include "fuzz/fuzz_support.h"
#include "rpc/ucx/ucx_envelope.h"

namespace {

namespace ucx = braid::rpc::ucx_detail;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> input(data, size);
  ucx::Envelope env;
  if (!braid::fuzz::accepts([&] { env = ucx::decode_envelope(input); })) return 0;
  if (input.size() < ucx::kEnvelopeBytes) braid::fuzz::fail("fuzz_ucx_envelope", "accepted a short envelope");
  std::array<uint8_t, ucx::kEnvelopeBytes> again{};
  ucx::encode_envelope(env, again.data());
  if (std::memcmp(again.data(), data, again.size()) != 0) {
    braid::fuzz::fail("fuzz_ucx_envelope", "decode/encode round trip differs");
  }
  braid::rpc::WireLimits limits;
  limits.max_meta_bytes = 4096;
  limits.max_table_bytes = 4096;
  braid::fuzz::accepts([&] { ucx::check_frame_envelope(env, limits); });
  braid::fuzz::accepts([&] { ucx::check_frame_envelope(env, braid::rpc::WireLimits{}); });
  return 0;
}
