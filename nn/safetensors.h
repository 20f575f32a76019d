// safetensors files (Hugging Face's weight format): braid state dicts to and from the files that
// PyTorch, transformers and the `safetensors` package read and write.
//
// Format (integers little-endian):
//
//   offset  size  field
//   0       8     u64 N, the header's length in bytes
//   8       N     UTF-8 JSON object: tensor name -> {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]},
//                 plus an optional "__metadata__": {string: string}; writers pad it with spaces to a
//                 multiple of 8 bytes
//   8+N     ...   the data buffer: each tensor's elements, C order, little-endian, at [b, e) of the buffer
//
// dtypes: BOOL, U8, I8, I32, I64, F16, BF16, F32, F64 (braid's nine). A file holding other safetensors
// dtypes (I16, U16, U32, U64, F8_*) is refused with a message that names the dtype.
//
// Reading is as strict as the Rust reference implementation: every check below is made before anything is
// returned, and each failure is an InvalidArgument naming the file (and the tensor, when about one):
// truncated file, header length past the end of the file or above 100,000,000 bytes, invalid JSON, a
// header that is not an object, a duplicate key anywhere in it, an entry that is not exactly {dtype, shape,
// data_offsets} of the right types, an unknown dtype, a negative or non-integer dimension, data_offsets
// that are not two integers with begin <= end <= the buffer's size, a byte count that differs from
// shape x element size, two tensors that overlap, bytes that belong to no tensor (a gap between tensors or
// after the last: the reference's "MetadataIncompleteBuffer"; no compliant writer leaves any, so they mean
// a damaged or foreign file), a BOOL byte other than 0 or 1, and an "__metadata__" that is not an object
// of strings.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "nn/module.h"

namespace braid::nn {

// Writes `state` to `path` atomically, as save_state_dict does (a temporary file in the same directory,
// fsync'd, renamed over `path`, the directory fsync'd). Tensors are stored in state-dict order, back to
// back, so a reader that follows the data order gets the state dict's order back; CUDA tensors are copied
// to the CPU and non-contiguous ones made contiguous. `metadata` goes into "__metadata__" (omitted when
// empty). Throws InvalidArgument, before creating any file, for an undefined or sparse tensor, an empty
// or duplicate name, the name "__metadata__", a name or metadata string that is not valid UTF-8, or a
// dtype safetensors cannot hold; braid::Error when writing fails (the old file, if any, is left as it was).
void save_safetensors(const StateDict& state, const std::string& path,
                      const std::map<std::string, std::string>& metadata = {});

// SafetensorsFile(path).state_dict(): every tensor, in the order of its data in the file.
StateDict load_safetensors(const std::string& path);

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  Shape shape;
  // Byte range within the data buffer, which starts at 8 + header length.
  uint64_t begin = 0;
  uint64_t end = 0;
};

// An opened, validated safetensors file. The constructor maps the whole file (mmap, MAP_PRIVATE,
// PROT_READ | PROT_WRITE) and checks everything listed above; afterwards nothing can fail but lookups
// of absent names.
//
// Tensors are CPU tensors, contiguous, without autograd history. When a tensor's data lies at an address
// aligned for its dtype (the usual case: writers pad the header to 8 bytes and the official writer orders
// tensors by alignment), the tensor is a view into the mapping: no copy, and pages are read from disk
// when first touched. Otherwise (a tensor after an odd-sized one, as save_safetensors may write) it is a
// copy. Writing into a mapped tensor is private copy-on-write: the file never changes.
//
// Lifetime: the mapping lives as long as this object or any tensor made from it, whichever is last; the
// tensors hold it through their storage's deleter. As with any mapped file, the file must not be
// truncated in place while mapped (the process would get SIGBUS on a page past the new end) and pages not
// yet read may see in-place writes by others; save_safetensors never does either, since it replaces a
// file by renaming a new one over it.
//
// Copies share the mapping. Thread-safety: const methods may be called concurrently.
class SafetensorsFile {
 public:
  // Throws InvalidArgument naming `path` when the file cannot be opened or fails any check.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return path_; }
  // In the order of their data in the file (ties, possible only between empty tensors, in header order).
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  // Throws InvalidArgument naming the file and the tensor when there is no tensor `name`.
  const SafetensorsEntry& entry(const std::string& name) const;
  Tensor tensor(const std::string& name) const;
  // Every tensor, in entries() order.
  StateDict state_dict() const;

 private:
  struct Mapping;  // the mapped file; defined in safetensors.cc

  Tensor make_tensor(const SafetensorsEntry& e) const;

  std::string path_;
  std::shared_ptr<const Mapping> mapping_;
  uint64_t data_start_ = 0;  // 8 + header length
  std::vector<SafetensorsEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace braid::nn
