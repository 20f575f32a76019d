#include "nn/state_dict_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
#include <utility>

#include "base/check.h"
#include "nn/state_dict_format.h"

namespace braid::nn {
namespace {

using detail::get_le;
using detail::kStateDictHeaderBytes;
using detail::kStateDictMaxNameBytes;
using detail::kStateDictTrailerBytes;

}  // namespace

StateDictFile::StateDictFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  BRAID_CHECK_ARG(fd_ >= 0, "StateDictFile('{}'): cannot open: {}", path_, std::strerror(errno));
  try {
    struct stat st {};
    BRAID_CHECK_ARG(::fstat(fd_, &st) == 0, "StateDictFile('{}'): cannot stat: {}", path_, std::strerror(errno));
    const auto size = static_cast<uint64_t>(st.st_size);
    uint8_t head[kStateDictHeaderBytes] = {};
    read_at(0, head, std::min<uint64_t>(size, sizeof(head)), "the file header");
    detail::check_file_header(head, size, "StateDictFile", path_);
    const uint64_t body = size - kStateDictTrailerBytes;
    const auto count = get_le<uint64_t>(head + 8);
    BRAID_CHECK_ARG(count <= (body - kStateDictHeaderBytes) / (4 + 1 + kTensorHeaderFixedBytes),
                    "StateDictFile('{}'): entry count {} does not fit in {} bytes", path_, count, size);
    entries_.reserve(static_cast<size_t>(count));
    uint64_t at = kStateDictHeaderBytes;
    std::vector<uint8_t> buf(kTensorMaxHeaderBytes);
    for (uint64_t i = 0; i < count; ++i) {
      BRAID_CHECK_ARG(body - at >= 4, "StateDictFile('{}'): entry {} of {} is truncated", path_, i, count);
      uint8_t len_bytes[4];
      read_at(at, len_bytes, 4, "an entry's name length");
      const auto len = get_le<uint32_t>(len_bytes);
      at += 4;
      BRAID_CHECK_ARG(len > 0 && len <= kStateDictMaxNameBytes && len <= body - at,
                      "StateDictFile('{}'): entry {} has a bad name length {}", path_, i, len);
      std::string name(len, '\0');
      read_at(at, name.data(), len, "an entry's name");
      at += len;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), body - at));
      read_at(at, buf.data(), n, "a tensor header");
      TensorHeader header;
      try {
        header = parse_tensor_header(std::span<const uint8_t>(buf.data(), n));
      } catch (const InvalidArgument& e) {
        BRAID_THROW(InvalidArgument, "StateDictFile('{}'): tensor '{}': {}", path_, name, e.what());
      }
      at += header.header_bytes;
      BRAID_CHECK_ARG(header.payload_bytes <= body - at,
                      "StateDictFile('{}'): tensor '{}' is truncated (its payload needs {} bytes, {} left)", path_,
                      name, header.payload_bytes, body - at);
      BRAID_CHECK_ARG(index_.emplace(name, entries_.size()).second, "StateDictFile('{}'): duplicate name '{}'", path_,
                      name);
      entries_.push_back({std::move(name), std::move(header), at});
      at += entries_.back().header.payload_bytes;
    }
    BRAID_CHECK_ARG(at == body, "StateDictFile('{}'): {} unexpected bytes after the last of {} entries", path_,
                    body - at, count);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

StateDictFile::~StateDictFile() {
  if (fd_ >= 0) ::close(fd_);
}

StateDictFile::StateDictFile(StateDictFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      entries_(std::move(other.entries_)),
      index_(std::move(other.index_)),
      payload_bytes_read_(other.payload_bytes_read_) {}

StateDictFile& StateDictFile::operator=(StateDictFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    entries_ = std::move(other.entries_);
    index_ = std::move(other.index_);
    payload_bytes_read_ = other.payload_bytes_read_;
  }
  return *this;
}

const StateDictFile::Entry* StateDictFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

Tensor StateDictFile::read(const std::string& name) const {
  const Entry* e = find(name);
  BRAID_CHECK_ARG(e != nullptr, "StateDictFile('{}'): no entry '{}'", path_, name);
  std::vector<uint8_t> payload(static_cast<size_t>(e->header.payload_bytes));
  read_at(e->payload_offset, payload.data(), payload.size(), "a tensor's payload");
  payload_bytes_read_ += payload.size();
  try {
    return tensor_from_payload(e->header, payload);
  } catch (const InvalidArgument& ex) {
    BRAID_THROW(InvalidArgument, "StateDictFile('{}'): tensor '{}': {} (the file is corrupt)", path_, name, ex.what());
  }
}

void StateDictFile::read_at(uint64_t offset, void* out, size_t n, const char* what) const {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    const ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    BRAID_CHECK_ARG(r >= 0, "StateDictFile('{}'): reading {} at byte {} failed: {}", path_, what, offset,
                    std::strerror(errno));
    BRAID_CHECK_ARG(r > 0, "StateDictFile('{}'): the file ended while reading {} at byte {} (it shrank?)", path_,
                    what, offset);
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
}

}  // namespace braid::nn
