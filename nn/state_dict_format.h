// The state-dict file format's fixed parts (serialize.h describes the format), shared by its writer
// (save_state_dict), its readers (load_state_dict_file, StateDictFile) and the checkpoint image
// (StateDictImage), so that they check the same things with the same words. Internal to nn.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "nn/module.h"

namespace braid::nn::detail {

inline constexpr uint64_t kStateDictHeaderBytes = 16;  // magic, version, flags, entry count
inline constexpr uint64_t kStateDictTrailerBytes = 4;  // CRC-32 of every byte before it
// A bound on a name's length, so that a corrupt length field cannot ask for gigabytes.
inline constexpr uint32_t kStateDictMaxNameBytes = 1u << 16;

template <class T>
T get_le(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}

template <class T>
void put_le(uint8_t* out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
}

// What a state-dict file cannot hold, refused before anything is written: an empty, overlong or
// duplicate name, an undefined or sparse tensor, too many dimensions. "{op}('{path}'): ...".
void check_entries(const StateDict& state, std::string_view op, const std::string& path);

// Checks the first bytes of a file of `size` bytes (`head`: its first min(size, 16) bytes): the magic
// before the size, so that a short foreign file gets the specific error without any of its bytes
// echoed (an error may travel back to whoever named the file), then the size, version and flags.
// "{op}('{path}'): ...".
void check_file_header(const uint8_t* head, uint64_t size, std::string_view op, const std::string& path);

}  // namespace braid::nn::detail
