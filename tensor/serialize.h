// The versioned binary format of a tensor (docs/WIRE.md), reused by the RPC layer:
//
//   offset size  field
//   0      4     magic "BRTN"
//   4      2     format version (1)
//   6      1     dtype (DType enum value)
//   7      1     ndim (<= 64)
//   8      8     payload byte length (= numel * element size)
//   16     4     CRC-32 of the payload (zlib)
//   20     4     CRC-32 of bytes 0..19 and the shape
//   24     8*nd  shape (int64, little-endian); strides are implied contiguous
//   ...          payload: the elements, row-major
//
// deserialize() validates every field and throws InvalidArgument naming what is wrong (truncated input,
// bad magic, unsupported version, unknown dtype, size mismatch, checksum mismatch); it never reads past
// the input. All integers are little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tensor/tensor.h"

namespace braid {

inline constexpr uint32_t kTensorMagic = 0x4E545242;  // "BRTN" little-endian
inline constexpr uint16_t kTensorFormatVersion = 1;
inline constexpr size_t kTensorHeaderFixedBytes = 24;
inline constexpr size_t kTensorMaxDims = 64;
// The longest header: fixed part and a shape of kTensorMaxDims sizes.
inline constexpr size_t kTensorMaxHeaderBytes = kTensorHeaderFixedBytes + 8 * kTensorMaxDims;

// The header for `t` (CPU or CUDA; a CUDA tensor's payload checksum is computed on a host copy).
std::vector<uint8_t> serialize_header(const Tensor& t);
// Header + payload in one buffer.
std::vector<uint8_t> serialize(const Tensor& t);
// Appends header + payload to `out` (reusing its capacity).
void serialize_into(const Tensor& t, std::vector<uint8_t>& out);

// A tensor's header, parsed and checked (magic, version, header checksum, dtype, shape, payload length)
// without its payload: what a reader needs to find, size or skip the tensor before reading it.
struct TensorHeader {
  DType dtype = DType::Float32;
  Shape shape;
  size_t header_bytes = 0;    // 24 + 8 * ndim
  uint64_t payload_bytes = 0;
  uint32_t payload_crc = 0;   // CRC-32 (zlib) of the payload
};
// Bytes of the header of a tensor of `ndim` dimensions.
constexpr size_t tensor_header_bytes(size_t ndim) { return kTensorHeaderFixedBytes + 8 * ndim; }
// Writes the header of a tensor of `dtype` and `shape` whose payload (`payload_bytes`, CRC-32
// `payload_crc`) is elsewhere: into out[0, tensor_header_bytes(shape.size())).
void write_tensor_header(DType dtype, const Shape& shape, uint64_t payload_bytes, uint32_t payload_crc, uint8_t* out);
// Parses the header at the front of `bytes` (the payload need not follow).
TensorHeader parse_tensor_header(std::span<const uint8_t> bytes);
// The tensor of header `h` from its payload, checked against the header's payload checksum.
Tensor tensor_from_payload(const TensorHeader& h, std::span<const uint8_t> payload);

struct DeserializeResult {
  Tensor tensor;         // a fresh contiguous CPU tensor
  size_t bytes_read = 0;  // header + payload
};
// Parses one tensor from the front of `bytes`.
DeserializeResult deserialize_prefix(std::span<const uint8_t> bytes);
// Parses exactly one tensor; trailing bytes are an error.
Tensor deserialize(std::span<const uint8_t> bytes);

}  // namespace braid
