// The corpus replay: a fuzz target's LLVMFuzzerTestOneInput linked with this main instead of libFuzzer, so
// that the normal (g++) build runs every committed input through the target under CTest, sanitizers or not.
//
//   fuzz_<name>_replay PATH...   each PATH a file or a folder (walked recursively, in name order)
//
// Fails (exit 1) when a PATH is missing or when the paths hold no input at all: an empty replay would pass
// without testing anything. A finding in an input crashes this program as it would crash the fuzzer; the
// input's path is printed first, so that the test's output names it.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs_under(const fs::path& path) {
  std::vector<fs::path> out;
  if (fs::is_regular_file(path)) {
    out.push_back(path);
  } else {
    for (const auto& entry : fs::recursive_directory_iterator(path)) {
      if (entry.is_regular_file()) out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PATH... (corpus files or folders)\n", argv[0]);
    return 2;
  }
  size_t total = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path root(argv[i]);
    if (!fs::exists(root)) {
      std::fprintf(stderr, "%s: %s does not exist\n", argv[0], root.c_str());
      return 1;
    }
    const auto files = inputs_under(root);
    for (const auto& file : files) {
      std::printf("%s\n", file.c_str());
      std::fflush(stdout);
      std::ifstream in(file, std::ios::binary);
      const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      // A copy sized exactly, so that AddressSanitizer sees a read one past the input's end.
      auto* data = new uint8_t[bytes.size()];
      std::copy(bytes.begin(), bytes.end(), data);
      LLVMFuzzerTestOneInput(data, bytes.size());
      delete[] data;
    }
    std::printf("%s: %zu inputs\n", root.c_str(), files.size());
    total += files.size();
  }
  if (total == 0) {
    std::fprintf(stderr, "%s: no inputs to replay\n", argv[0]);
    return 1;
  }
  std::printf("replayed %zu inputs\n", total);
  return 0;
}
