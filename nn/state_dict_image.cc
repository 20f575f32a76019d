#include "nn/state_dict_image.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/check.h"
#include "base/crc32.h"
#include "base/fault_injection.h"
#include "nn/atomic_file.h"
#include "nn/serialize.h"
#include "nn/state_dict_format.h"
#include "tensor/allocator.h"
#include "tensor/serialize.h"

namespace braid::nn {
namespace {

using detail::kStateDictHeaderBytes;
using detail::kStateDictTrailerBytes;
using detail::put_le;
// Direct writes in pieces of this size (a multiple of the alignment).
constexpr size_t kWritePiece = size_t{8} << 20;

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

}  // namespace

StateDictImage::StateDictImage() = default;
StateDictImage::~StateDictImage() { release(); }

void StateDictImage::release() {
  if (memory_ != nullptr) CpuAllocator::instance().deallocate(memory_, capacity_);
  memory_ = nullptr;
  capacity_ = 0;
}

void StateDictImage::layout(const StateDict& state, const std::string& path) {
  detail::check_entries(state, "save_state_dict", path);
  std::vector<Entry> entries;
  entries.reserve(state.size());
  uint64_t at = kStateDictHeaderBytes;
  for (const auto& [name, t] : state) {
    Entry e{name, t.dtype(), t.shape()};
    at += 4 + name.size();
    e.header_offset = at;
    e.payload_offset = at + tensor_header_bytes(t.shape().size());
    e.payload_bytes = static_cast<uint64_t>(t.nbytes());
    at = e.payload_offset + e.payload_bytes;
    entries.push_back(std::move(e));
  }
  const uint64_t file_bytes = at + kStateDictTrailerBytes;
  bool same = memory_ != nullptr && file_bytes == file_bytes_ && entries.size() == entries_.size();
  for (size_t i = 0; same && i < entries.size(); ++i) {
    same = entries[i].name == entries_[i].name && entries[i].dtype == entries_[i].dtype &&
           entries[i].shape == entries_[i].shape;
  }
  entries_ = std::move(entries);
  if (same) return;
  release();
  const uint64_t capacity = round_up(file_bytes, detail::kDirectAlignment);
  memory_ = static_cast<uint8_t*>(CpuAllocator::instance().allocate(capacity));  // OutOfMemoryError naming the size
  capacity_ = capacity;
  file_bytes_ = file_bytes;
  // The fixed bytes: the file header, the names and the block's padding (payloads: fill(); headers: seal()).
  uint8_t* m = memory_;
  put_le<uint32_t>(m, kStateDictMagic);
  put_le<uint16_t>(m + 4, kStateDictFormatVersion);
  put_le<uint16_t>(m + 6, 0);
  put_le<uint64_t>(m + 8, entries_.size());
  for (const Entry& e : entries_) {
    const uint64_t name_at = e.header_offset - e.name.size() - 4;
    put_le<uint32_t>(m + name_at, static_cast<uint32_t>(e.name.size()));
    std::memcpy(m + name_at + 4, e.name.data(), e.name.size());
  }
  std::memset(m + file_bytes_, 0, capacity_ - file_bytes_);
}

void StateDictImage::fill(size_t i, const Tensor& t) {
  const Entry& e = entries_.at(i);
  BRAID_CHECK_ARG(t.dtype() == e.dtype && t.shape() == e.shape, "checkpoint entry '{}': {} where the layout has {} {}",
                  e.name, t.describe(), dtype_name(e.dtype), fmt::format("[{}]", fmt::join(e.shape, ", ")));
  const Tensor host = t.cpu().contiguous();
  if (e.payload_bytes > 0) std::memcpy(memory_ + e.payload_offset, host.data_ptr(), e.payload_bytes);
}

void StateDictImage::seal() {
  uint8_t* m = memory_;
  uint32_t crc = crc32_update(0, m, kStateDictHeaderBytes);
  for (Entry& e : entries_) {
    e.payload_crc = crc32_update(0, m + e.payload_offset, e.payload_bytes);
    write_tensor_header(e.dtype, e.shape, e.payload_bytes, e.payload_crc, m + e.header_offset);
    const uint64_t name_at = e.header_offset - e.name.size() - 4;
    crc = crc32_update(crc, m + name_at, e.payload_offset - name_at);  // name length, name, tensor header
    crc = crc32_concat(crc, e.payload_crc, e.payload_bytes);
  }
  put_le<uint32_t>(m + file_bytes_ - kStateDictTrailerBytes, crc);
}

void StateDictImage::write(const std::string& path, bool direct) const {
  // O_DIRECT needs the memory aligned to the block too (a small image comes from a 64-byte aligned block).
  const uint8_t* m = memory_;
  direct = direct && reinterpret_cast<uintptr_t>(m) % detail::kDirectAlignment == 0;
  detail::AtomicFile file(path, "save_state_dict", direct);
  // Whole aligned blocks while direct (the last one padded, cut by truncate), the exact bytes otherwise.
  uint64_t at = 0;
  while (at < file_bytes_) {
    const uint64_t end = file.direct() ? std::min<uint64_t>(at + kWritePiece, capacity_)
                                       : std::min<uint64_t>(at + kWritePiece, file_bytes_);
    file.write(m + at, end - at);
    if (at == 0) fault::point("checkpoint");  // BRAID_FAULT: mid-write, the first piece out
    at = end;
  }
  if (at != file_bytes_) file.truncate(file_bytes_);
  file.commit();
}

}  // namespace braid::nn
