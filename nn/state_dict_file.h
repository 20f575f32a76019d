// A state-dict file (serialize.h's format) read on demand: the entries' names, dtypes and shapes first,
// then only the tensors asked for. What a rank uses to take its rows out of other ranks' checkpoint files
// without reading the rest of them (FSDP's resharded resume).
//
// Opening reads the file header and every entry's name and tensor header (a few hundred bytes each),
// checks that the entries tile the file exactly up to its trailing checksum, and keeps the file open.
// read() checks the tensor's own payload checksum. The whole-file checksum is not verified (that takes
// reading every byte); the per-tensor checksums cover every payload and header, so a corrupt entry is
// still found when it is read. Errors are InvalidArgument naming the path and the entry.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tensor/serialize.h"
#include "tensor/tensor.h"

namespace braid::nn {

class StateDictFile {
 public:
  struct Entry {
    std::string name;
    TensorHeader header;      // dtype, shape, payload size and checksum
    uint64_t payload_offset;  // where the payload starts in the file
  };

  explicit StateDictFile(std::string path);
  ~StateDictFile();
  StateDictFile(StateDictFile&& other) noexcept;
  StateDictFile& operator=(StateDictFile&& other) noexcept;
  StateDictFile(const StateDictFile&) = delete;
  StateDictFile& operator=(const StateDictFile&) = delete;

  const std::string& path() const { return path_; }
  // In file order.
  const std::vector<Entry>& entries() const { return entries_; }
  // Null when the file has no entry of that name.
  const Entry* find(const std::string& name) const;
  // The entry's tensor (a fresh contiguous CPU tensor). InvalidArgument for a name the file does not
  // have, a read error, or a payload that does not match its checksum.
  Tensor read(const std::string& name) const;
  // Payload bytes read so far by read(): what a caller reports as "read only what it needed".
  uint64_t payload_bytes_read() const { return payload_bytes_read_; }

 private:
  void read_at(uint64_t offset, void* out, size_t n, const char* what) const;

  std::string path_;
  int fd_ = -1;
  std::vector<Entry> entries_;
  std::map<std::string, size_t> index_;
  mutable uint64_t payload_bytes_read_ = 0;
};

}  // namespace braid::nn
