#include "nn/serialize.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <span>
#include <vector>

#include "base/check.h"
#include "base/crc32.h"
#include "base/fault_injection.h"
#include "nn/atomic_file.h"
#include "nn/state_dict_format.h"
#include "tensor/serialize.h"

namespace braid::nn {
namespace {

using detail::get_le;
using detail::kStateDictHeaderBytes;
using detail::kStateDictMaxNameBytes;
using detail::kStateDictTrailerBytes;

std::string errno_text() { return std::strerror(errno); }

template <class T>
void put_le(std::vector<uint8_t>& out, T v) {
  out.resize(out.size() + sizeof(T));
  detail::put_le<T>(out.data() + out.size() - sizeof(T), v);
}

std::vector<uint8_t> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  BRAID_CHECK_ARG(fd >= 0, "load_state_dict_file('{}'): cannot open: {}", path, errno_text());
  std::vector<uint8_t> bytes;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) bytes.reserve(static_cast<size_t>(st.st_size));
  uint8_t buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const std::string why = errno_text();
      ::close(fd);
      BRAID_THROW(InvalidArgument, "load_state_dict_file('{}'): read failed: {}", path, why);
    }
    if (r == 0) break;
    bytes.insert(bytes.end(), buf, buf + r);
  }
  ::close(fd);
  return bytes;
}

}  // namespace

void save_state_dict(const StateDict& state, const std::string& path) {
  // Validate everything first: a bad entry must not cost the existing file.
  detail::check_entries(state, "save_state_dict", path);
  detail::AtomicFile file(path, "save_state_dict");
  uint32_t crc = 0;
  const auto emit = [&](const std::vector<uint8_t>& bytes) {
    crc = crc32_update(crc, bytes.data(), bytes.size());
    file.write(bytes.data(), bytes.size());
  };
  std::vector<uint8_t> buf;
  buf.reserve(1 << 16);
  put_le<uint32_t>(buf, kStateDictMagic);
  put_le<uint16_t>(buf, kStateDictFormatVersion);
  put_le<uint16_t>(buf, 0);
  put_le<uint64_t>(buf, state.size());
  emit(buf);
  fault::point("checkpoint");  // BRAID_FAULT: mid-write, the header out and the tensors not
  for (const auto& [name, t] : state) {
    buf.clear();
    put_le<uint32_t>(buf, static_cast<uint32_t>(name.size()));
    buf.insert(buf.end(), name.begin(), name.end());
    // The tensor's header, then its bytes straight from its memory: no copy of a large tensor through buf
    // (the same bytes as serialize_into would give).
    const Tensor host = t.cpu().contiguous();
    const std::vector<uint8_t> header = serialize_header(host);
    buf.insert(buf.end(), header.begin(), header.end());
    emit(buf);
    if (host.nbytes() > 0) {
      // The header holds the payload's CRC already: the file's running CRC takes it by combination
      // instead of a second pass over the bytes (half the checksum work of a large checkpoint).
      const uint32_t payload_crc = parse_tensor_header(header).payload_crc;
      crc = crc32_concat(crc, payload_crc, host.nbytes());
      file.write(host.data_ptr(), host.nbytes());
    }
  }
  buf.clear();
  put_le<uint32_t>(buf, crc);
  file.write(buf.data(), buf.size());
  file.commit();
}

StateDict load_state_dict_file(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file(path);
  const size_t size = bytes.size();
  const uint8_t* p = bytes.data();
  // Magic and version come before the checksum so that a foreign or newer file gets the specific error.
  detail::check_file_header(p, size, "load_state_dict_file", path);
  const size_t body = size - kStateDictTrailerBytes;
  const auto stored_crc = get_le<uint32_t>(p + body);
  const uint32_t actual_crc = crc32_update(0, p, body);
  BRAID_CHECK_ARG(stored_crc == actual_crc,
                  "load_state_dict_file('{}'): checksum mismatch (stored 0x{:08x}, computed 0x{:08x}): the file is "
                  "truncated or corrupt", path, stored_crc, actual_crc);

  // The checksum matched, so what follows guards against a file written wrongly, not against bit rot.
  const auto count = get_le<uint64_t>(p + 8);
  // Each entry takes at least a name length, one name byte and a tensor header.
  const uint64_t min_entry = 4 + 1 + kTensorHeaderFixedBytes;
  BRAID_CHECK_ARG(count <= (body - kStateDictHeaderBytes) / min_entry,
                  "load_state_dict_file('{}'): entry count {} does not fit in {} bytes", path, count, size);
  StateDict out;
  out.reserve(static_cast<size_t>(count));
  std::set<std::string> names;
  size_t at = kStateDictHeaderBytes;
  for (uint64_t i = 0; i < count; ++i) {
    BRAID_CHECK_ARG(body - at >= 4, "load_state_dict_file('{}'): entry {} of {} is truncated", path, i, count);
    const auto len = get_le<uint32_t>(p + at);
    at += 4;
    BRAID_CHECK_ARG(len > 0 && len <= kStateDictMaxNameBytes && len <= body - at,
                    "load_state_dict_file('{}'): entry {} has a bad name length {}", path, i, len);
    std::string name(reinterpret_cast<const char*>(p + at), len);
    at += len;
    BRAID_CHECK_ARG(names.insert(name).second, "load_state_dict_file('{}'): duplicate name '{}'", path, name);
    DeserializeResult r;
    try {
      r = deserialize_prefix(std::span<const uint8_t>(p + at, body - at));
    } catch (const InvalidArgument& e) {
      BRAID_THROW(InvalidArgument, "load_state_dict_file('{}'): tensor '{}': {}", path, name, e.what());
    }
    at += r.bytes_read;
    out.emplace_back(std::move(name), std::move(r.tensor));
  }
  BRAID_CHECK_ARG(at == body, "load_state_dict_file('{}'): {} unexpected bytes after the last of {} entries", path,
                  body - at, count);
  return out;
}

void save(const Module& module, const std::string& path) { save_state_dict(module.state_dict(), path); }

void load(Module& module, const std::string& path, bool strict) {
  module.load_state_dict(load_state_dict_file(path), strict);
}

}  // namespace braid::nn
