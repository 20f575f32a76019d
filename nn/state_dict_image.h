// A state-dict file's bytes (serialize.h's format, byte for byte what save_state_dict writes) laid out in
// one block of memory that a caller fills in place and then writes with O_DIRECT: an asynchronous
// checkpoint's snapshot (runtime/run/checkpoint_writer.h). Copying the state into the image is the
// snapshot; writing it needs no further copy, and O_DIRECT spares the page cache's copy and its
// write-back, which otherwise cost the training about a second of CPU per GiB on this machine.
//
//   StateDictImage image;
//   image.layout(state);                         // offsets; the memory is kept while the layout is the same
//   image.fill(i, tensor);                       // each entry's payload, now or later, from any one thread
//   image.seal();                                // tensor headers (payload CRCs), the file's CRC
//   image.write(path);                           // atomically: temporary file, fsync, rename
//
// Not thread-safe: one owner at a time (the checkpoint writer hands it between its caller and its thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/module.h"

namespace braid::nn {

class StateDictImage {
 public:
  StateDictImage();
  ~StateDictImage();
  StateDictImage(const StateDictImage&) = delete;
  StateDictImage& operator=(const StateDictImage&) = delete;

  // Lays the entries of `state` out (names, dtypes and shapes; not their values). Keeps the memory when
  // the layout is the one it has, else allocates anew (pages are touched by the first fill). Validates
  // the entries as save_state_dict does: InvalidArgument naming `path` and the entry.
  void layout(const StateDict& state, const std::string& path);
  size_t size() const { return entries_.size(); }
  // Copies entry i's values (a tensor of its dtype and shape, any device or strides) into the image.
  void fill(size_t i, const Tensor& t);
  // Writes the tensor headers and the trailing CRC; every entry must be filled since layout().
  void seal();
  // The sealed image to `path` (atomically; O_DIRECT where the filesystem allows, when `direct`).
  void write(const std::string& path, bool direct = true) const;

  uint64_t file_bytes() const { return file_bytes_; }  // the file's size
  uint64_t capacity() const { return capacity_; }      // the memory held (file_bytes, block-aligned)

 private:
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t header_offset = 0;  // of its tensor header; the name comes before, the payload after
    uint64_t payload_offset = 0;
    uint64_t payload_bytes = 0;
    uint32_t payload_crc = 0;
  };
  void release();

  std::vector<Entry> entries_;
  // From braid's CPU allocator (counted in its stats; blocks of 2 MiB and more are 2 MiB aligned and on
  // transparent huge pages, which make the copy in and the first touch cheaper).
  uint8_t* memory_ = nullptr;
  uint64_t file_bytes_ = 0;
  uint64_t capacity_ = 0;
};

}  // namespace braid::nn
