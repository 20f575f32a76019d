// State-dict files: a module's parameters and buffers on disk.
//
// Format, version 1 (all integers little-endian):
//
//   offset size  field
//   0      4     magic "BRSD"
//   4      2     format version (1)
//   6      2     flags (0; readers reject other values, so a later version can use them)
//   8      8     entry count
//   16     ...   entries, in state-dict order: u32 name length, the name's bytes (no terminator), then
//                the tensor in tensor/serialize.h's checked "BRTN" format (header + payload)
//   end-4  4     CRC-32 (zlib) of every byte before it
//
// save_state_dict() writes atomically: to a temporary file in the same directory, fsync'd, then renamed
// over `path` (and the directory fsync'd), so a crash leaves either the old file or the new one, never a
// torn one. load_state_dict_file() validates everything before returning and throws InvalidArgument
// naming the path and the problem (cannot open, truncated, bad magic, unsupported version, checksum
// mismatch, a malformed entry, a duplicate name); it never returns part of a file.
#pragma once

#include <cstdint>
#include <string>

#include "nn/module.h"

namespace braid::nn {

inline constexpr uint32_t kStateDictMagic = 0x44535242;  // "BRSD" little-endian
inline constexpr uint16_t kStateDictFormatVersion = 1;

// Every tensor must be defined and dense (CPU or CUDA); names must be non-empty and unique. Throws
// InvalidArgument for those, braid::Error when writing fails (the old file, if any, is left as it was).
void save_state_dict(const StateDict& state, const std::string& path);
// The entries in file order; tensors are contiguous CPU tensors of the saved dtypes and shapes.
StateDict load_state_dict_file(const std::string& path);

// module.state_dict() to `path`.
void save(const Module& module, const std::string& path);
// load_state_dict_file(path) into `module` (see Module::load_state_dict for `strict`).
void load(Module& module, const std::string& path, bool strict = true);

}  // namespace braid::nn
