#include "nn/state_dict_format.h"

#include <set>

#include "base/check.h"
#include "nn/serialize.h"
#include "tensor/serialize.h"

namespace braid::nn::detail {

void check_entries(const StateDict& state, std::string_view op, const std::string& path) {
  std::set<std::string> names;
  for (const auto& [name, t] : state) {
    BRAID_CHECK_ARG(!name.empty(), "{}('{}'): an entry has an empty name", op, path);
    BRAID_CHECK_ARG(name.size() <= kStateDictMaxNameBytes, "{}('{}'): name of {} bytes is too long (at most {})", op,
                    path, name.size(), kStateDictMaxNameBytes);
    BRAID_CHECK_ARG(names.insert(name).second, "{}('{}'): duplicate name '{}'", op, path, name);
    BRAID_CHECK_ARG(t.defined(), "{}('{}'): '{}' is an undefined tensor", op, path, name);
    BRAID_CHECK_ARG(!t.is_sparse(), "{}('{}'): '{}' is a sparse tensor; state dicts hold dense tensors", op, path,
                    name);
    BRAID_CHECK_ARG(t.dim() <= static_cast<int64_t>(kTensorMaxDims),
                    "{}('{}'): '{}' has {} dimensions; the format allows at most {}", op, path, name, t.dim(),
                    kTensorMaxDims);
  }
}

void check_file_header(const uint8_t* head, uint64_t size, std::string_view op, const std::string& path) {
  BRAID_CHECK_ARG(size >= 4, "{}('{}'): file is truncated ({} bytes; not a state-dict file)", op, path, size);
  BRAID_CHECK_ARG(get_le<uint32_t>(head) == kStateDictMagic,
                  "{}('{}'): bad magic (the file does not start with \"BRSD\"): not a braid state-dict file", op,
                  path);
  BRAID_CHECK_ARG(size >= kStateDictHeaderBytes + kStateDictTrailerBytes,
                  "{}('{}'): file is truncated ({} bytes, the header and checksum alone take {})", op, path, size,
                  kStateDictHeaderBytes + kStateDictTrailerBytes);
  const auto version = get_le<uint16_t>(head + 4);
  BRAID_CHECK_ARG(version == kStateDictFormatVersion,
                  "{}('{}'): unsupported format version {} (this build reads version {})", op, path, version,
                  kStateDictFormatVersion);
  const auto flags = get_le<uint16_t>(head + 6);
  BRAID_CHECK_ARG(flags == 0, "{}('{}'): unsupported flags 0x{:04x}", op, path, flags);
}

}  // namespace braid::nn::detail
