// Helpers of the safetensors tests: files as bytes, a file built by hand from the format's layout (never
// by braid's writer), the test's own parse of a header, and the fixtures' paths.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensor/tensor.h"
#include "tests/unit/nn/nn_test_util.h"

namespace braid::nn::testing {

inline void put_u64(Bytes& b, uint64_t v) {
  for (size_t i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

inline uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// A file by the format's layout: the header's length (or `length` when given), the header text as is
// (no padding), then `data`.
inline Bytes st_bytes(const std::string& header, const Bytes& data, std::optional<uint64_t> length = std::nullopt) {
  Bytes b;
  put_u64(b, length.value_or(header.size()));
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// Random bytes of every bit pattern (0/1 for bool), so NaN payloads and signed zeros are covered.
inline Tensor random_bytes_tensor(const Shape& shape, DType dtype, std::mt19937_64& rng) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i) {
    p[i] = dtype == DType::Bool ? static_cast<uint8_t>(rng() & 1u) : static_cast<uint8_t>(rng());
  }
  return t;
}

inline bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

// The test's own parse of a file's header (nlohmann, no duplicate detection): enough to check layout.
inline nlohmann::json header_of(const Bytes& file, uint64_t* data_start = nullptr) {
  REQUIRE(file.size() >= 8);
  const uint64_t n = get_u64(file.data());
  REQUIRE(n <= file.size() - 8);
  if (data_start != nullptr) *data_start = 8 + n;
  return nlohmann::json::parse(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(n));
}

inline std::string fixture(const std::string& name) {
  return (std::filesystem::path(__FILE__).parent_path() / "../../fixtures/safetensors" / name).string();
}

}  // namespace braid::nn::testing
