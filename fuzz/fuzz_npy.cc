// .npy files (runtime/data/npy_file.h). Input byte 0: even parses the rest as a header's dict literal
// (parse_npy_header); odd opens the rest as a whole .npy file (NpyFile: preamble, header, dtype, sizes)
// and reads every data byte it then offers.
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_support.h"
#include "runtime/data/npy_file.h"

namespace {

namespace data = braid::runtime::data;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size < 1) return 0;
  if ((bytes[0] & 1) == 0) {
    const std::string_view text(reinterpret_cast<const char*>(bytes) + 1, size - 1);
    data::NpyHeader header;
    if (braid::fuzz::accepts([&] { header = data::parse_npy_header(text, "fuzz.npy"); })) {
      (void)data::shape_text(header.shape);
    }
    return 0;
  }
  const braid::fuzz::MemFile file({bytes + 1, size - 1});
  braid::fuzz::accepts([&] {
    const data::NpyFile npy(file.path());
    if (npy.data_offset() + npy.nbytes() != size - 1) braid::fuzz::fail("fuzz_npy", "data past the file's end");
    if (npy.nbytes() != static_cast<size_t>(npy.numel()) * npy.itemsize()) {
      braid::fuzz::fail("fuzz_npy", "nbytes() differs from numel() * itemsize()");
    }
    unsigned sum = 0;
    for (size_t i = 0; i < npy.nbytes(); ++i) sum += npy.data()[i];
    (void)sum;
    npy.release_pages();
  });
  return 0;
}
