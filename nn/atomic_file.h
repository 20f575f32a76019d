// Crash-safe file replacement, shared by the nn layer's writers (state-dict files, safetensors).
//
// AtomicFile writes to a temporary file in the destination's directory; commit() fsyncs it, renames it
// over the destination and fsyncs the directory, so a crash leaves either the old file or the new one,
// never a torn one. If the object dies before commit() (an exception, an early return), the temporary
// file is closed and removed and the destination is untouched. Internal to nn: not installed API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace braid::nn::detail {

// What O_DIRECT asks of buffers, offsets and sizes (the largest logical block size in common use).
inline constexpr size_t kDirectAlignment = 4096;

class AtomicFile {
 public:
  // `op` names the caller in error messages: "{op}('{path}'): ...". Throws InvalidArgument when the
  // temporary file cannot be created (a missing directory, no permission). `direct`: open it with
  // O_DIRECT where the filesystem allows (the data then goes from the caller's memory to the device
  // without the page cache's copy, or the CPU time of its write-back); the caller then writes whole
  // blocks of kDirectAlignment bytes from memory aligned to it, and truncate()s to the real size.
  AtomicFile(std::string path, std::string op, bool direct = false);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Throws braid::Error when the write fails (disk full, I/O error). A direct write the filesystem turns
  // down (EINVAL: alignment) goes on without O_DIRECT.
  void write(const void* data, size_t n);
  // Whether the file is (still) written with O_DIRECT.
  bool direct() const { return direct_; }
  // Cuts the file to `size` bytes (the padding of the last direct block).
  void truncate(uint64_t size);
  // fsync, rename into place, fsync the directory (best effort: some filesystems refuse). Throws
  // braid::Error when any step before the rename fails; the destination is then left as it was.
  void commit();

 private:
  std::string path_;
  std::string op_;
  std::string tmp_;
  int fd_ = -1;
  bool direct_ = false;
  bool committed_ = false;
};

}  // namespace braid::nn::detail
