// safetensors files (nn/safetensors.h): the 8-byte header length, the JSON header with every check the
// reader makes, and the tensors it then maps or copies out of the data buffer.
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "nn/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const braid::fuzz::MemFile file({data, size});
  braid::fuzz::accepts([&] {
    const braid::nn::SafetensorsFile st(file.path());
    uint64_t total = 0;
    for (const auto& [name, t] : st.state_dict()) {
      if (!st.contains(name)) braid::fuzz::fail("fuzz_safetensors", "a tensor that entries() does not name");
      total += t.nbytes();
    }
    if (total > size) braid::fuzz::fail("fuzz_safetensors", "more tensor bytes than the file holds");
  });
  return 0;
}
