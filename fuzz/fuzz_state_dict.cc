// State-dict files (nn/serialize.h "BRSD"), which are also what a checkpoint holds per rank
// (runtime/run/checkpoint_dir.h: <step>/rank-<R>.brsd), and the tensor format inside them
// (tensor/serialize.h "BRTN").
//
// Input byte 0: bit 1 clear reads the rest as a state-dict file (load_state_dict_file), bit 1 set as one
// tensor (deserialize); bit 0 set first repairs the checksums (fuzz/crc_fixup.h), so that the fuzzer gets
// past them. An accepted tensor must serialize back to the same bytes: the format has one encoding.
#include <cstdint>
#include <vector>

#include "fuzz/crc_fixup.h"
#include "fuzz/fuzz_support.h"
#include "nn/serialize.h"
#include "tensor/serialize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::vector<uint8_t> bytes(data + 1, data + size);
  const bool fix = (data[0] & 1) != 0;
  if ((data[0] & 2) != 0) {
    if (fix) braid::fuzz::fix_tensor_crcs(bytes.data(), bytes.size());
    braid::Tensor t;
    if (!braid::fuzz::accepts([&] { t = braid::deserialize(bytes); })) return 0;
    if (braid::serialize(t) != bytes) braid::fuzz::fail("fuzz_state_dict", "deserialize/serialize round trip differs");
    return 0;
  }
  if (fix) braid::fuzz::fix_state_dict_crcs(bytes.data(), bytes.size());
  const braid::fuzz::MemFile file(bytes);
  braid::nn::StateDict state;
  if (!braid::fuzz::accepts([&] { state = braid::nn::load_state_dict_file(file.path()); })) return 0;
  for (const auto& [name, t] : state) {
    if (name.empty() || !t.defined()) braid::fuzz::fail("fuzz_state_dict", "an accepted entry is empty");
  }
  return 0;
}
