// The checked binary tensor format (layout in serialize.h and docs/WIRE.md).
//
// Validation order in deserialize_prefix(): magic, version, ndim (it fixes the header length), header
// truncation, header CRC (so a corrupted header reads as a checksum mismatch rather than as a nonsense
// field), dtype, shape, payload length, payload truncation, payload CRC, and finally bool payload values.
#include "tensor/serialize.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "base/crc32.h"

namespace braid {
namespace {

static_assert(std::endian::native == std::endian::little,
              "serialize.cc copies element bytes verbatim and so assumes a little-endian host");

constexpr size_t kMaxDims = kTensorMaxDims;
constexpr size_t kOffsetVersion = 4;
constexpr size_t kOffsetDType = 6;
constexpr size_t kOffsetNdim = 7;
constexpr size_t kOffsetPayloadLen = 8;
constexpr size_t kOffsetPayloadCrc = 16;
constexpr size_t kOffsetHeaderCrc = 20;

uint32_t crc32_of(const uint8_t* data, size_t n) { return crc32_update(0, data, n); }

template <class T>
void put_le(uint8_t* out, T value) {
  using U = std::make_unsigned_t<T>;
  const U u = static_cast<U>(value);
  for (size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<uint8_t>(u >> (8 * i));
}

template <class T>
T get_le(const uint8_t* in) {
  using U = std::make_unsigned_t<T>;
  U u = 0;
  for (size_t i = 0; i < sizeof(T); ++i) u = static_cast<U>(u | (static_cast<U>(in[i]) << (8 * i)));
  return static_cast<T>(u);
}

// The CRC covering the header: bytes [0, 20) and the shape.
uint32_t header_crc(const uint8_t* header, size_t ndim) {
  const uint32_t c = crc32_of(header, kOffsetHeaderCrc);
  return crc32_update(c, header + kTensorHeaderFixedBytes, 8 * ndim);
}

// A contiguous CPU copy of `t` (t itself when it already is one).
Tensor host_contiguous(const Tensor& t, const char* op) {
  BRAID_CHECK_ARG(t.defined(), "{}: cannot serialize an undefined tensor", op);
  BRAID_CHECK_ARG(t.dim() <= static_cast<int64_t>(kMaxDims),
                  "{}: tensor {} has {} dimensions; the format allows at most {}", op, t.describe(), t.dim(),
                  kMaxDims);
  return t.cpu().contiguous();
}

}  // namespace

void write_tensor_header(DType dtype, const Shape& shape, uint64_t payload_bytes, uint32_t payload_crc, uint8_t* out) {
  const size_t nd = shape.size();
  put_le<uint32_t>(out, kTensorMagic);
  put_le<uint16_t>(out + kOffsetVersion, kTensorFormatVersion);
  out[kOffsetDType] = static_cast<uint8_t>(dtype);
  out[kOffsetNdim] = static_cast<uint8_t>(nd);
  put_le<uint64_t>(out + kOffsetPayloadLen, payload_bytes);
  put_le<uint32_t>(out + kOffsetPayloadCrc, payload_crc);
  for (size_t i = 0; i < nd; ++i) put_le<int64_t>(out + kTensorHeaderFixedBytes + 8 * i, shape[i]);
  put_le<uint32_t>(out + kOffsetHeaderCrc, header_crc(out, nd));
}

namespace {

// Writes the header for contiguous host tensor `h` into out[0, 24 + 8*ndim).
void write_header(const Tensor& h, uint8_t* out) {
  const auto* payload = static_cast<const uint8_t*>(h.data_ptr());
  write_tensor_header(h.dtype(), h.shape(), static_cast<uint64_t>(h.nbytes()), crc32_of(payload, h.nbytes()), out);
}

size_t header_bytes(size_t ndim) { return kTensorHeaderFixedBytes + 8 * ndim; }

bool known_dtype(uint8_t value) {
  const auto is = [value](DType d) { return static_cast<uint8_t>(d) == value; };
  return std::any_of(kRealDTypes.begin(), kRealDTypes.end(), is) ||
         std::any_of(kComplexDTypes.begin(), kComplexDTypes.end(), is);
}

}  // namespace

std::vector<uint8_t> serialize_header(const Tensor& t) {
  const Tensor h = host_contiguous(t, "serialize_header");
  std::vector<uint8_t> out(header_bytes(static_cast<size_t>(h.dim())));
  write_header(h, out.data());
  return out;
}

std::vector<uint8_t> serialize(const Tensor& t) {
  std::vector<uint8_t> out;
  serialize_into(t, out);
  return out;
}

void serialize_into(const Tensor& t, std::vector<uint8_t>& out) {
  const Tensor h = host_contiguous(t, "serialize");
  const size_t hdr = header_bytes(static_cast<size_t>(h.dim()));
  const size_t start = out.size();
  out.resize(start + hdr + h.nbytes());
  write_header(h, out.data() + start);
  if (h.nbytes() > 0) std::memcpy(out.data() + start + hdr, h.data_ptr(), h.nbytes());
}

TensorHeader parse_tensor_header(std::span<const uint8_t> bytes) {
  const size_t avail = bytes.size();
  const uint8_t* p = bytes.data();
  BRAID_CHECK_ARG(avail >= 4,
                  "deserialize: truncated input: the tensor header needs at least {} bytes, only {} available",
                  kTensorHeaderFixedBytes, avail);
  const uint32_t magic = get_le<uint32_t>(p);
  BRAID_CHECK_ARG(magic == kTensorMagic,
                  "deserialize: bad magic 0x{:08x} (expected 0x{:08x}, \"BRTN\"): not a braid tensor", magic,
                  kTensorMagic);
  BRAID_CHECK_ARG(avail >= kTensorHeaderFixedBytes,
                  "deserialize: truncated input: the tensor header needs at least {} bytes, only {} available",
                  kTensorHeaderFixedBytes, avail);
  const uint16_t version = get_le<uint16_t>(p + kOffsetVersion);
  BRAID_CHECK_ARG(version == kTensorFormatVersion,
                  "deserialize: unsupported tensor format version {} (this build reads version {})", version,
                  kTensorFormatVersion);
  const size_t nd = p[kOffsetNdim];
  BRAID_CHECK_ARG(nd <= kMaxDims, "deserialize: ndim {} is too large (at most {})", nd, kMaxDims);
  const size_t hdr = header_bytes(nd);
  BRAID_CHECK_ARG(avail >= hdr,
                  "deserialize: truncated input: the header of a {}-dim tensor needs {} bytes, only {} available",
                  nd, hdr, avail);
  const uint32_t stored_header_crc = get_le<uint32_t>(p + kOffsetHeaderCrc);
  const uint32_t actual_header_crc = header_crc(p, nd);
  BRAID_CHECK_ARG(stored_header_crc == actual_header_crc,
                  "deserialize: header checksum mismatch (stored 0x{:08x}, computed 0x{:08x}): corrupted header",
                  stored_header_crc, actual_header_crc);

  const uint8_t dtype_value = p[kOffsetDType];
  BRAID_CHECK_ARG(known_dtype(dtype_value), "deserialize: unknown dtype value {}", dtype_value);
  const auto dtype = static_cast<DType>(dtype_value);

  Shape shape(nd);
  uint64_t numel = 1;
  bool overflow = false;
  for (size_t i = 0; i < nd; ++i) {
    shape[i] = get_le<int64_t>(p + kTensorHeaderFixedBytes + 8 * i);
    BRAID_CHECK_ARG(shape[i] >= 0, "deserialize: negative size {} in dimension {} of shape {}", shape[i], i,
                    shape_str(shape));
  }
  for (int64_t s : shape) {
    if (s == 0) {
      numel = 0;
      overflow = false;
      break;
    }
    if (!overflow) overflow = __builtin_mul_overflow(numel, static_cast<uint64_t>(s), &numel);
  }
  const uint64_t es = element_size(dtype);
  uint64_t expected_len = 0;
  overflow = overflow || numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
             __builtin_mul_overflow(numel, es, &expected_len);
  BRAID_CHECK_ARG(!overflow, "deserialize: shape {} of dtype {} is too large", shape_str(shape), dtype);
  const uint64_t payload_len = get_le<uint64_t>(p + kOffsetPayloadLen);
  BRAID_CHECK_ARG(payload_len == expected_len,
                  "deserialize: payload length {} does not match shape {} of dtype {} ({} elements * {} bytes = {})",
                  payload_len, shape_str(shape), dtype, numel, es, expected_len);
  return {dtype, std::move(shape), hdr, payload_len, get_le<uint32_t>(p + kOffsetPayloadCrc)};
}

Tensor tensor_from_payload(const TensorHeader& h, std::span<const uint8_t> payload) {
  BRAID_CHECK_ARG(payload.size() == h.payload_bytes, "deserialize: the payload of a tensor of shape {} is {} bytes, "
                  "{} given", shape_str(h.shape), h.payload_bytes, payload.size());
  const uint8_t* data = payload.data();
  const size_t n = payload.size();
  const uint32_t actual_payload_crc = crc32_of(data, n);
  BRAID_CHECK_ARG(h.payload_crc == actual_payload_crc,
                  "deserialize: payload checksum mismatch (stored 0x{:08x}, computed 0x{:08x}): corrupted data",
                  h.payload_crc, actual_payload_crc);
  if (h.dtype == DType::Bool) {
    const auto* bad = std::find_if(data, data + n, [](uint8_t b) { return b > 1; });
    BRAID_CHECK_ARG(bad == data + n, "deserialize: invalid bool value {} at element {}", *bad, bad - data);
  }
  Tensor out = Tensor::empty(h.shape, h.dtype);
  if (n > 0) std::memcpy(out.data_ptr(), data, n);
  return out;
}

DeserializeResult deserialize_prefix(std::span<const uint8_t> bytes) {
  const TensorHeader h = parse_tensor_header(bytes);
  const size_t avail = bytes.size();
  BRAID_CHECK_ARG(h.payload_bytes <= avail - h.header_bytes,
                  "deserialize: truncated input: header + payload need {} bytes, only {} available",
                  static_cast<uint64_t>(h.header_bytes) + h.payload_bytes, avail);
  const size_t n = static_cast<size_t>(h.payload_bytes);
  return {tensor_from_payload(h, bytes.subspan(h.header_bytes, n)), h.header_bytes + n};
}

Tensor deserialize(std::span<const uint8_t> bytes) {
  DeserializeResult r = deserialize_prefix(bytes);
  BRAID_CHECK_ARG(r.bytes_read == bytes.size(),
                  "deserialize: {} trailing bytes after the tensor (it ends at byte {} of {})",
                  bytes.size() - r.bytes_read, r.bytes_read, bytes.size());
  return std::move(r.tensor);
}

}  // namespace braid
