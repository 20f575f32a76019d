// Crash-safe file replacement, shared by the nn layer's writers (state-dict files, safetensors).
//
// AtomicFile writes to a temporary file in the destination's directory; commit() fsyncs it, renames it
// over the destination and fsyncs the directory, so a crash leaves either the old file or the new one,
// never a torn one. If the object dies before commit() (an exception, an early return), the temporary
// file is closed and removed and the destination is untouched. Internal to nn: not installed API.
#pragma once

#include <cstddef>
#include <string>

namespace braid::nn::detail {

class AtomicFile {
 public:
  // `op` names the caller in error messages: "{op}('{path}'): ...". Throws InvalidArgument when the
  // temporary file cannot be created (a missing directory, no permission).
  AtomicFile(std::string path, std::string op);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Throws braid::Error when the write fails (disk full, I/O error).
  void write(const void* data, size_t n);
  // fsync, rename into place, fsync the directory (best effort: some filesystems refuse). Throws
  // braid::Error when any step before the rename fails; the destination is then left as it was.
  void commit();

 private:
  std::string path_;
  std::string op_;
  std::string tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace braid::nn::detail
