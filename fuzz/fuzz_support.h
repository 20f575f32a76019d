// What every fuzz target shares (docs/FUZZING.md).
//
// A target's LLVMFuzzerTestOneInput feeds one input to a decoder. The decoder may reject the input, but only
// as it documents: by throwing a braid::Error (InvalidArgument, WireError, ...) that names what is wrong.
// Anything else is a finding and must reach the fuzzer as a crash: a sanitizer report, a signal, an
// InternalError (a broken invariant of braid's own), or any other exception (std::bad_alloc,
// std::length_error, nlohmann::json's errors, ...), which escapes the target and ends in std::terminate.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "base/error.h"

namespace braid::fuzz {

// BRAID_FUZZ_VERBOSE=1: print each rejection's message (to see why a seed or a replayed input is refused).
inline bool verbose() {
  static const bool on = std::getenv("BRAID_FUZZ_VERBOSE") != nullptr;
  return on;
}

// Runs `decode`, treating a documented rejection as the expected outcome. Returns whether it accepted.
template <class F>
bool accepts(F&& decode) {
  try {
    decode();
    if (verbose()) std::fprintf(stderr, "accepted\n");
    return true;
  } catch (const InternalError&) {
    throw;
  } catch (const Error& e) {
    if (verbose()) std::fprintf(stderr, "rejected: %s\n", e.what());
    return false;
  }
}

// A property the target checks after a successful decode (a round trip, a size) does not hold.
[[noreturn]] inline void fail(const char* target, const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", target, what.c_str());
  std::abort();
}

// The input as an anonymous in-memory file, for readers that take a path (state dicts, safetensors, .npy):
// path() is /proc/self/fd/<n>, so nothing touches the disk and nothing is left behind.
class MemFile {
 public:
  explicit MemFile(std::span<const uint8_t> bytes) : fd_(::memfd_create("braid-fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) fail("MemFile", "memfd_create failed");
    size_t at = 0;
    while (at < bytes.size()) {
      const ssize_t n = ::write(fd_, bytes.data() + at, bytes.size() - at);
      if (n <= 0) fail("MemFile", "write to the memfd failed");
      at += static_cast<size_t>(n);
    }
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

}  // namespace braid::fuzz
