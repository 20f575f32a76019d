// The checked binary tensor format: round trips over random shapes and every dtype (bit-exact, also for
// non-contiguous inputs) and every corruption path of deserialize.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>

#include "tensor/cuda/device_api.h"
#include "tensor/factory.h"
#include "tensor/serialize.h"

namespace braid {
namespace {

using Bytes = std::vector<uint8_t>;

// An independent bitwise CRC-32 (the zlib / IEEE 802.3 polynomial, reflected).
uint32_t ref_crc32(const uint8_t* p, size_t n, uint32_t crc = 0) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t read_u32(const Bytes& b, size_t at) {
  return static_cast<uint32_t>(b[at]) | static_cast<uint32_t>(b[at + 1]) << 8 |
         static_cast<uint32_t>(b[at + 2]) << 16 | static_cast<uint32_t>(b[at + 3]) << 24;
}

void write_u32(Bytes& b, size_t at, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

void write_u64(Bytes& b, size_t at, uint64_t v) {
  for (size_t i = 0; i < 8; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// Recomputes both CRCs after a test edits a field, so that the field's own check is what fails.
void fix_crcs(Bytes& b) {
  const size_t nd = b[7];
  const size_t hdr = 24 + 8 * nd;
  const size_t payload = b.size() >= hdr ? b.size() - hdr : 0;
  write_u32(b, 16, ref_crc32(b.data() + hdr, payload));
  write_u32(b, 20, ref_crc32(b.data() + 24, 8 * nd, ref_crc32(b.data(), 20)));
}

// A tensor whose bytes are random (every bit pattern for the numeric types; 0/1 for bool).
Tensor random_bytes_tensor(const Shape& shape, DType dtype, std::mt19937_64& rng) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i) {
    p[i] = dtype == DType::Bool ? static_cast<uint8_t>(rng() & 1u) : static_cast<uint8_t>(rng());
  }
  return t;
}

Shape random_shape(std::mt19937_64& rng, int64_t ndim) {
  Shape s(static_cast<size_t>(ndim));
  for (auto& d : s) d = (rng() % 8 == 0) ? 0 : static_cast<int64_t>(rng() % 4 + 1);
  return s;
}

// The row-major bytes of `t`.
Bytes bytes_of(const Tensor& t) {
  const Tensor c = t.cpu().contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return Bytes(p, p + c.nbytes());
}

void check_round_trip(const Tensor& t) {
  const Bytes wire = serialize(t);
  REQUIRE(wire.size() == kTensorHeaderFixedBytes + 8 * static_cast<size_t>(t.dim()) + t.nbytes());
  const Tensor back = deserialize(wire);
  CHECK(back.dtype() == t.dtype());
  CHECK(back.shape() == t.shape());
  CHECK(back.is_contiguous());
  CHECK(back.device().is_cpu());
  CHECK_FALSE(back.shares_storage_with(t));
  CHECK(bytes_of(back) == bytes_of(t));
}

std::string error_of(const Bytes& b) {
  try {
    (void)deserialize(b);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("serialize: golden bytes of a small int32 tensor", "[serialize]") {
  const Tensor t = from_vector<int32_t>({1, -2, 3, 4, 5, 6}, {2, 3});
  const Bytes b = serialize(t);
  REQUIRE(b.size() == 24 + 16 + 24);
  CHECK(Bytes(b.begin(), b.begin() + 8) == Bytes{'B', 'R', 'T', 'N', 1, 0, 3, 2});
  CHECK(Bytes(b.begin() + 8, b.begin() + 16) == Bytes{24, 0, 0, 0, 0, 0, 0, 0});
  CHECK(Bytes(b.begin() + 24, b.begin() + 40) == Bytes{2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0});
  CHECK(Bytes(b.begin() + 40, b.begin() + 48) == Bytes{1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff});
  CHECK(read_u32(b, 16) == ref_crc32(b.data() + 40, 24));
  CHECK(read_u32(b, 20) == ref_crc32(b.data() + 24, 16, ref_crc32(b.data(), 20)));
  CHECK(ref_crc32(reinterpret_cast<const uint8_t*>("123456789"), 9) == 0xCBF43926u);  // the reference CRC is right
  CHECK(serialize_header(t) == Bytes(b.begin(), b.begin() + 40));
}

TEST_CASE("serialize: round trips random shapes of every dtype bit-exactly", "[serialize]") {
  std::mt19937_64 rng(1234);
  for (DType dtype : kRealDTypes) {
    for (int64_t ndim = 0; ndim <= 5; ++ndim) {
      for (int rep = 0; rep < 6; ++rep) {
        const Shape shape = random_shape(rng, ndim);
        INFO(dtype_name(dtype) << " " << shape_str(shape));
        check_round_trip(random_bytes_tensor(shape, dtype, rng));
      }
    }
  }
}

TEST_CASE("serialize: non-contiguous inputs are written in row-major order", "[serialize]") {
  std::mt19937_64 rng(99);
  for (DType dtype : kRealDTypes) {
    INFO(dtype_name(dtype));
    const Tensor base = random_bytes_tensor({4, 5, 6}, dtype, rng);
    const Tensor tr = base.transpose(0, 2);
    REQUIRE_FALSE(tr.is_contiguous());
    check_round_trip(tr);
    check_round_trip(base.slice(1, 1, 5, 2));
    check_round_trip(base.permute({1, 2, 0}).narrow(2, 1, 2));
    check_round_trip(base.select(2, 3));
    check_round_trip(base.narrow(0, 1, 2).slice(2, 0, 6, 3).transpose(0, 1));
    check_round_trip(base.select(0, 1).select(0, 2).unsqueeze(0).expand({3, 6}));
    check_round_trip(base.narrow(1, 2, 0));
    // The values (not just the bytes) survive: compare with the base element by element.
    const Tensor back = deserialize(serialize(tr));
    CHECK(bytes_of(back.transpose(0, 2)) == bytes_of(base));
  }
}

TEST_CASE("serialize: specific values keep their bits", "[serialize]") {
  const Tensor f = from_vector<float>({0.0f, -0.0f, 1.5f, -3e38f, 1e-45f, std::numeric_limits<float>::infinity(),
                                       std::numeric_limits<float>::quiet_NaN()});
  CHECK(bytes_of(deserialize(serialize(f))) == bytes_of(f));
  const Tensor i = from_vector<int64_t>({INT64_MIN, -1, 0, INT64_MAX});
  CHECK(to_vector<int64_t>(deserialize(serialize(i))) == std::vector<int64_t>{INT64_MIN, -1, 0, INT64_MAX});
  const Tensor s = scalar_tensor(2.5, DType::Float64);
  const Tensor back = deserialize(serialize(s));
  CHECK(back.dim() == 0);
  CHECK(back.item<double>() == 2.5);
}

TEST_CASE("serialize: serialize_into appends and deserialize_prefix reads one tensor at a time", "[serialize]") {
  const Tensor a = from_vector<float>({1, 2, 3});
  const Tensor b = from_vector<int8_t>({-1, 7}, {2, 1});
  Bytes buf = {0xAA};  // existing content is kept
  serialize_into(a, buf);
  const size_t first = buf.size() - 1;
  serialize_into(b, buf);
  CHECK(buf[0] == 0xAA);
  const std::span<const uint8_t> all(buf.data() + 1, buf.size() - 1);
  const DeserializeResult r1 = deserialize_prefix(all);
  CHECK(r1.bytes_read == first);
  CHECK(to_vector<float>(r1.tensor) == std::vector<float>{1, 2, 3});
  const DeserializeResult r2 = deserialize_prefix(all.subspan(r1.bytes_read));
  CHECK(r2.bytes_read == all.size() - first);
  CHECK(r2.tensor.shape() == Shape{2, 1});
  CHECK(to_vector<int8_t>(r2.tensor) == std::vector<int8_t>{-1, 7});
  // Two tensors are not one: deserialize() rejects the second as trailing bytes.
  CHECK_THROWS_WITH(deserialize(all), Catch::Contains("trailing bytes") && Catch::Contains(std::to_string(first)));
}

TEST_CASE("serialize: every truncated prefix throws InvalidArgument saying how much was needed", "[serialize]") {
  const Bytes full = serialize(from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  REQUIRE(full.size() == 64);
  for (size_t n = 0; n < full.size(); ++n) {
    INFO("prefix length " << n);
    const Bytes prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));  // exact-size allocation
    CHECK_THROWS_AS(deserialize_prefix(prefix), InvalidArgument);
    CHECK_THROWS_WITH(deserialize(prefix), Catch::Contains("truncated") &&
                                               Catch::Contains("only " + std::to_string(n) + " available"));
  }
  CHECK_THROWS_WITH(deserialize(Bytes(full.begin(), full.begin() + 10)), Catch::Contains("needs at least 24 bytes"));
  CHECK_THROWS_WITH(deserialize(Bytes(full.begin(), full.begin() + 30)), Catch::Contains("needs 40 bytes"));
  CHECK_THROWS_WITH(deserialize(Bytes(full.begin(), full.begin() + 50)), Catch::Contains("need 64 bytes"));
  CHECK_NOTHROW(deserialize(full));
  CHECK_THROWS_WITH(deserialize(Bytes{}), Catch::Contains("truncated"));
}

TEST_CASE("serialize: a flipped byte is a checksum error", "[serialize]") {
  const Bytes good = serialize(from_vector<double>({1, 2, 3, 4}, {2, 2}));
  for (size_t i = 0; i < good.size(); ++i) {
    INFO("byte " << i);
    Bytes bad = good;
    bad[i] ^= 0x10;
    const std::string msg = error_of(bad);
    if (i < 4) {
      CHECK_THAT(msg, Catch::Contains("bad magic"));
    } else if (i < 6) {
      CHECK_THAT(msg, Catch::Contains("unsupported tensor format version"));
    } else if (i == 7) {
      CHECK_THAT(msg, Catch::StartsWith("deserialize: "));  // the header length changes; any clear error
    } else if (i < 40) {
      CHECK_THAT(msg, Catch::Contains("header checksum mismatch"));
    } else {
      CHECK_THAT(msg, Catch::Contains("payload checksum mismatch"));
    }
  }
}

TEST_CASE("serialize: malformed fields are named", "[serialize]") {
  const Bytes good = serialize(from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  SECTION("bad magic") {
    Bytes b = good;
    b[0] = 'X';
    CHECK_THROWS_WITH(deserialize(b), Catch::Contains("bad magic") && Catch::Contains("not a braid tensor"));
  }
  SECTION("unsupported version") {
    Bytes b = good;
    b[4] = 2;
    fix_crcs(b);
    CHECK_THROWS_WITH(deserialize(b), Catch::Contains("unsupported tensor format version 2"));
  }
  SECTION("unknown dtype") {
    for (uint8_t v : {static_cast<uint8_t>(kDTypeCount), uint8_t{200}, uint8_t{255}}) {
      Bytes b = good;
      b[6] = v;
      fix_crcs(b);
      CHECK_THROWS_WITH(deserialize(b), Catch::Contains("unknown dtype value " + std::to_string(v)));
    }
  }
  SECTION("ndim too large") {
    Bytes b = good;
    b[7] = 65;
    CHECK_THROWS_WITH(deserialize(b), Catch::Contains("ndim 65 is too large"));
  }
  SECTION("negative size") {
    Bytes b = good;
    write_u64(b, 24, static_cast<uint64_t>(int64_t{-2}));
    fix_crcs(b);
    CHECK_THROWS_WITH(deserialize(b), Catch::Contains("negative size -2"));
  }
  SECTION("payload length does not match the shape") {
    Bytes b = good;
    write_u64(b, 8, 20);
    fix_crcs(b);
    CHECK_THROWS_WITH(deserialize(b), Catch::Contains("payload length 20 does not match") &&
                                          Catch::Contains("[2, 3]") && Catch::Contains("24"));
    write_u64(b, 8, 28);
    b.resize(b.size() + 4);
    fix_crcs(b);
    CHECK_THROWS_WITH(deserialize(b), Catch::Contains("payload length 28 does not match"));
  }
  SECTION("shape too large") {
    Bytes b = good;
    write_u64(b, 24, uint64_t{1} << 40);
    write_u64(b, 32, uint64_t{1} << 40);
    fix_crcs(b);
    CHECK_THROWS_WITH(deserialize(b), Catch::Contains("too large"));
  }
  SECTION("a huge declared payload is a truncation, not an allocation") {
    Bytes b = good;
    write_u64(b, 24, int64_t{1} << 30);
    write_u64(b, 8, (uint64_t{3} << 30) * 4);
    fix_crcs(b);
    CHECK_THROWS_WITH(deserialize(b), Catch::Contains("truncated") && Catch::Contains("only 64 available"));
  }
  SECTION("trailing bytes") {
    Bytes b = good;
    b.push_back(0);
    CHECK_THROWS_WITH(deserialize(b), Catch::Contains("1 trailing bytes"));
    CHECK(deserialize_prefix(b).bytes_read == good.size());
  }
  SECTION("header checksum field itself") {
    Bytes b = good;
    b[20] ^= 1;
    CHECK_THROWS_WITH(deserialize(b), Catch::Contains("header checksum mismatch"));
  }
}

TEST_CASE("serialize: bool payload bytes must be 0 or 1", "[serialize]") {
  Bytes b = serialize(from_vector<bool>({true, false, true}));
  b.back() = 2;
  fix_crcs(b);
  CHECK_THROWS_WITH(deserialize(b), Catch::Contains("invalid bool value 2 at element 2"));
}

TEST_CASE("serialize: 64 dims are allowed, and an undefined tensor is rejected", "[serialize]") {
  const Tensor t = Tensor::empty(Shape(64, 1), DType::Int32).fill_(7);
  const Tensor back = deserialize(serialize(t));
  CHECK(back.dim() == 64);
  CHECK(back.item<int>() == 7);
  CHECK_THROWS_WITH(serialize(Tensor()), Catch::Contains("undefined"));
  CHECK_THROWS_WITH(serialize(Tensor::empty(Shape(65, 1))), Catch::Contains("at most 64"));
}

TEST_CASE("serialize: CUDA tensors are written from a host copy", "[serialize][cuda]") {
  if (cuda::device_count() == 0) {
    WARN("skipped: no CUDA device (" << cuda::unavailable_reason() << ")");
    return;
  }
  std::mt19937_64 rng(5);
  for (DType dtype : kRealDTypes) {
    const Tensor host = random_bytes_tensor({3, 4}, dtype, rng);
    const Tensor dev = host.cuda().transpose(0, 1);
    const Bytes wire = serialize(dev);
    CHECK(serialize_header(dev) == Bytes(wire.begin(), wire.begin() + 40));
    const Tensor back = deserialize(wire);
    CHECK(back.device().is_cpu());
    CHECK(bytes_of(back) == bytes_of(host.transpose(0, 1)));
  }
}

}  // namespace braid
