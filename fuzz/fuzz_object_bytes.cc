// The bytes of one object of the object collectives (rpc/value_bytes.h): value_from_bytes() on the whole
// input, with a 1 MiB payload limit. An accepted input must survive a second round: value_to_bytes of the
// decoded value decodes again and encodes to the same bytes.
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "rpc/value_bytes.h"

namespace rpc = braid::rpc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rpc::WireLimits limits;
  limits.max_payload_bytes = 1u << 20;
  limits.max_meta_bytes = 1u << 20;
  limits.max_table_bytes = 1u << 16;
  rpc::Value first;
  if (!braid::fuzz::accepts([&] { first = rpc::value_from_bytes(std::span<const uint8_t>(data, size), limits); })) {
    return 0;
  }
  const std::vector<uint8_t> once = rpc::value_to_bytes(first);
  rpc::Value second;
  if (!braid::fuzz::accepts([&] { second = rpc::value_from_bytes(once, limits); })) {
    braid::fuzz::fail("fuzz_object_bytes", "a re-encoded object does not decode");
  }
  if (rpc::value_to_bytes(second) != once) braid::fuzz::fail("fuzz_object_bytes", "encode/decode round trip differs");
  return 0;
}
