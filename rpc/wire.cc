#include "rpc/wire.h"

#include <bit>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "tensor/dtype.h"
#include "tensor/factory.h"

namespace braid::rpc {

std::string_view message_type_name(MessageType type) {
  switch (type) {
    case MessageType::kHello: return "hello";
    case MessageType::kCall: return "call";
    case MessageType::kRemoteCall: return "remote call";
    case MessageType::kResult: return "result";
    case MessageType::kError: return "error";
    case MessageType::kRRefFetch: return "rref fetch";
    case MessageType::kRRefForkRequest: return "rref fork request";
    case MessageType::kRRefChildAccept: return "rref child accept";
    case MessageType::kRRefUserDelete: return "rref user delete";
    case MessageType::kPing: return "ping";
  }
  return "unknown";
}

namespace {

constexpr size_t kTableEntryFixedBytes = 4;
constexpr uint8_t kRequiresGradFlag = 1;

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));  // little-endian hosts only (static_assert below)
}

template <class T>
T get(std::span<const uint8_t> bytes, size_t at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof(T));
  return v;
}

static_assert(std::endian::native == std::endian::little, "braid's wire format assumes a little-endian host");

size_t table_bytes_of(const Message& msg) {
  size_t n = 0;
  for (const auto& t : msg.tensors) n += kTableEntryFixedBytes + 8 * static_cast<size_t>(t.dim());
  return n;
}

uint64_t payload_bytes_of(const Message& msg) {
  uint64_t n = 0;
  for (const auto& t : msg.tensors) n += t.nbytes();
  return n;
}

void check_sendable(const Message& msg) {
  if (!msg.requires_grad.empty() && msg.requires_grad.size() != msg.tensors.size()) {
    BRAID_THROW(WireError, "rpc {} #{}: {} requires_grad flags for {} tensors", message_type_name(msg.type), msg.id,
                msg.requires_grad.size(), msg.tensors.size());
  }
  for (size_t i = 0; i < msg.tensors.size(); ++i) {
    const Tensor& t = msg.tensors[i];
    if (!t.defined() || t.is_cuda() || t.is_sparse() || !t.is_contiguous() || t.dim() > kMaxTensorDims) {
      BRAID_THROW(WireError, "rpc {} #{}: tensor {} ({}) must be a defined, dense, contiguous CPU tensor of at "
                  "most {} dims to be framed", message_type_name(msg.type), msg.id, i,
                  t.defined() ? t.describe() : "undefined", kMaxTensorDims);
    }
  }
}

}  // namespace

FrameHeader header_of(const Message& msg) {
  FrameHeader h;
  h.type = msg.type;
  h.id = msg.id;
  const size_t table = table_bytes_of(msg);
  BRAID_CHECK_TYPED(WireError, table <= std::numeric_limits<uint32_t>::max() &&
                                   msg.meta.size() <= std::numeric_limits<uint32_t>::max(),
                    "rpc {} #{}: tensor table ({} bytes) or meta ({} bytes) exceeds 4 GiB", message_type_name(msg.type),
                    msg.id, table, msg.meta.size());
  h.table_bytes = static_cast<uint32_t>(table);
  h.meta_bytes = static_cast<uint32_t>(msg.meta.size());
  BRAID_CHECK_TYPED(WireError, msg.ext.size() <= std::numeric_limits<uint16_t>::max(),
                    "rpc {} #{}: extension of {} bytes exceeds 65535", message_type_name(msg.type), msg.id,
                    msg.ext.size());
  h.ext_bytes = static_cast<uint16_t>(msg.ext.size());
  h.payload_bytes = payload_bytes_of(msg);
  return h;
}

void frame_prefix(const Message& msg, std::vector<uint8_t>& out) {
  check_sendable(msg);
  const FrameHeader h = header_of(msg);
  out.clear();
  out.reserve(kFrameHeaderBytes + h.body_bytes());
  put<uint32_t>(out, kWireMagic);
  put<uint8_t>(out, kWireVersion);
  put<uint8_t>(out, static_cast<uint8_t>(h.type));
  put<uint16_t>(out, h.ext_bytes);
  put<uint64_t>(out, h.id);
  put<uint32_t>(out, h.table_bytes);
  put<uint32_t>(out, h.meta_bytes);
  put<uint64_t>(out, h.payload_bytes);
  for (size_t i = 0; i < msg.tensors.size(); ++i) {
    const Tensor& t = msg.tensors[i];
    put<uint8_t>(out, static_cast<uint8_t>(t.dtype()));
    put<uint8_t>(out, static_cast<uint8_t>(t.dim()));
    const bool rg = !msg.requires_grad.empty() && msg.requires_grad[i] != 0;
    put<uint8_t>(out, rg ? kRequiresGradFlag : 0);
    put<uint8_t>(out, 0);
    for (int64_t s : t.shape()) put<int64_t>(out, s);
  }
  out.insert(out.end(), msg.ext.begin(), msg.ext.end());
  out.insert(out.end(), msg.meta.begin(), msg.meta.end());
}

std::vector<std::span<const uint8_t>> payload_spans(const Message& msg) {
  std::vector<std::span<const uint8_t>> spans;
  spans.reserve(msg.tensors.size());
  for (const auto& t : msg.tensors) {
    if (t.nbytes() == 0) continue;
    spans.emplace_back(static_cast<const uint8_t*>(t.data_ptr()), t.nbytes());
  }
  return spans;
}

FrameHeader decode_header(std::span<const uint8_t> bytes, const WireLimits& limits) {
  BRAID_CHECK_TYPED(WireError, bytes.size() >= kFrameHeaderBytes, "rpc frame: header truncated ({} of {} bytes)",
                    bytes.size(), kFrameHeaderBytes);
  const auto magic = get<uint32_t>(bytes, 0);
  BRAID_CHECK_TYPED(WireError, magic == kWireMagic, "rpc frame: bad magic 0x{:08x} (expected 0x{:08x}, \"BRPC\")",
                    magic, kWireMagic);
  const auto version = get<uint8_t>(bytes, 4);
  BRAID_CHECK_TYPED(WireError, version == kWireVersion, "rpc frame: unsupported format version {} (this build speaks {})",
                    version, kWireVersion);
  const auto type = get<uint8_t>(bytes, 5);
  BRAID_CHECK_TYPED(WireError, type >= kMinMessageType && type <= kMaxMessageType,
                    "rpc frame: unknown message type {} (valid: {}..{})", type, kMinMessageType, kMaxMessageType);
  FrameHeader h;
  h.ext_bytes = get<uint16_t>(bytes, 6);
  h.type = static_cast<MessageType>(type);
  h.id = get<uint64_t>(bytes, 8);
  h.table_bytes = get<uint32_t>(bytes, 16);
  h.meta_bytes = get<uint32_t>(bytes, 20);
  h.payload_bytes = get<uint64_t>(bytes, 24);
  BRAID_CHECK_TYPED(WireError, h.table_bytes <= limits.max_table_bytes,
                    "rpc frame #{}: tensor table of {} bytes exceeds the limit of {} bytes", h.id, h.table_bytes,
                    limits.max_table_bytes);
  BRAID_CHECK_TYPED(WireError, h.meta_bytes <= limits.max_meta_bytes,
                    "rpc frame #{}: meta of {} bytes exceeds the limit of {} bytes", h.id, h.meta_bytes,
                    limits.max_meta_bytes);
  BRAID_CHECK_TYPED(WireError, h.payload_bytes <= limits.max_payload_bytes,
                    "rpc frame #{}: tensor payload of {} bytes exceeds the limit of {} bytes", h.id, h.payload_bytes,
                    limits.max_payload_bytes);
  return h;
}

Message decode_body(const FrameHeader& header, std::span<const uint8_t> body) {
  BRAID_CHECK_TYPED(WireError, body.size() == header.body_bytes(),
                    "rpc frame #{}: body is {} bytes, header says {} (table) + {} (extension) + {} (meta)", header.id,
                    body.size(), header.table_bytes, header.ext_bytes, header.meta_bytes);
  Message msg;
  msg.type = header.type;
  msg.id = header.id;
  const auto table = body.first(header.table_bytes);
  size_t at = 0;
  uint64_t payload = 0;
  while (at < table.size()) {
    const size_t index = msg.tensors.size();
    BRAID_CHECK_TYPED(WireError, table.size() - at >= kTableEntryFixedBytes,
                      "rpc frame #{}: tensor table entry {} truncated", header.id, index);
    const auto dtype = get<uint8_t>(table, at);
    const auto ndim = get<uint8_t>(table, at + 1);
    const auto flags = get<uint8_t>(table, at + 2);
    const auto reserved = get<uint8_t>(table, at + 3);
    at += kTableEntryFixedBytes;
    BRAID_CHECK_TYPED(WireError, dtype < kDTypeCount, "rpc frame #{}: tensor {} has unknown dtype {}", header.id,
                      index, dtype);
    BRAID_CHECK_TYPED(WireError, ndim <= kMaxTensorDims, "rpc frame #{}: tensor {} has {} dims (at most {})",
                      header.id, index, ndim, kMaxTensorDims);
    BRAID_CHECK_TYPED(WireError, (flags & ~kRequiresGradFlag) == 0 && reserved == 0,
                      "rpc frame #{}: tensor {} has unknown flags 0x{:02x}/0x{:02x}", header.id, index, flags, reserved);
    BRAID_CHECK_TYPED(WireError, table.size() - at >= 8 * size_t{ndim},
                      "rpc frame #{}: tensor {} sizes truncated ({} dims)", header.id, index, ndim);
    Shape shape(ndim);
    const DType dt = static_cast<DType>(dtype);
    uint64_t bytes = element_size(dt);
    for (int d = 0; d < ndim; ++d) {
      const auto s = get<int64_t>(table, at);
      at += 8;
      BRAID_CHECK_TYPED(WireError, s >= 0, "rpc frame #{}: tensor {} has negative size {} in dim {}", header.id,
                        index, s, d);
      shape[d] = s;
      // Overflow-safe: any product beyond the payload length is already an error.
      if (s != 0 && bytes > header.payload_bytes / static_cast<uint64_t>(s)) bytes = header.payload_bytes + 1;
      else bytes *= static_cast<uint64_t>(s);
    }
    BRAID_CHECK_TYPED(WireError, bytes <= header.payload_bytes - payload,
                      "rpc frame #{}: tensor {} [{}] of {} needs more bytes than the payload length {} leaves",
                      header.id, index, fmt::join(shape, ", "), dtype_name(dt), header.payload_bytes);
    payload += bytes;
    msg.tensors.push_back(empty(shape, TensorOptions(dt)));
    msg.requires_grad.push_back((flags & kRequiresGradFlag) != 0 ? 1 : 0);
  }
  BRAID_CHECK_TYPED(WireError, payload == header.payload_bytes,
                    "rpc frame #{}: tensors need {} payload bytes, header says {}", header.id, payload,
                    header.payload_bytes);
  const auto ext = body.subspan(header.table_bytes, header.ext_bytes);
  msg.ext.assign(ext.begin(), ext.end());
  const auto meta = body.subspan(size_t{header.table_bytes} + header.ext_bytes);
  msg.meta.assign(meta.begin(), meta.end());
  return msg;
}

std::vector<std::span<uint8_t>> receive_spans(const Message& msg) {
  std::vector<std::span<uint8_t>> spans;
  spans.reserve(msg.tensors.size());
  for (const auto& t : msg.tensors) {
    if (t.nbytes() == 0) continue;
    spans.emplace_back(static_cast<uint8_t*>(t.data_ptr()), t.nbytes());
  }
  return spans;
}

}  // namespace braid::rpc
