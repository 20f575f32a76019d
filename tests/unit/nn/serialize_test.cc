// State-dict files: bit-exact round trips of every dtype, module save/load, atomic replacement, and every
// way a file can be wrong (truncated at any length, any flipped byte, bad magic/version/flags, duplicate
// names, trailing bytes, a missing file).
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "nn/container.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/normalization.h"
#include "nn/serialize.h"
#include "tensor/compare.h"
#include "tensor/serialize.h"
#include "tests/unit/nn/nn_test_util.h"

namespace braid::nn {
namespace {

using testing::Bytes;
using testing::read_bytes;
using testing::write_bytes;
using testing::TempDir;
using testing::values_of;

// An independent bitwise CRC-32 (zlib's polynomial, reflected), so the test does not trust the code's.
uint32_t ref_crc32(const uint8_t* p, size_t n) {
  uint32_t crc = ~0u;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

template <class T>
void put(Bytes& b, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) b.push_back(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i)));
}

// Writes the format by hand (header, entries, trailing CRC): the test's own reading of the spec in
// nn/serialize.h, used to build files that are well-formed except for one chosen field.
Bytes build_file(const std::vector<std::pair<std::string, Tensor>>& entries, uint16_t version = 1,
                 uint16_t flags = 0, uint64_t count_override = UINT64_MAX, const Bytes& trailing = {}) {
  Bytes b;
  put<uint32_t>(b, 0x44535242);
  put<uint16_t>(b, version);
  put<uint16_t>(b, flags);
  put<uint64_t>(b, count_override == UINT64_MAX ? entries.size() : count_override);
  for (const auto& [name, t] : entries) {
    put<uint32_t>(b, static_cast<uint32_t>(name.size()));
    b.insert(b.end(), name.begin(), name.end());
    const Bytes tb = serialize(t);
    b.insert(b.end(), tb.begin(), tb.end());
  }
  b.insert(b.end(), trailing.begin(), trailing.end());
  put<uint32_t>(b, ref_crc32(b.data(), b.size()));
  return b;
}

// Random bytes of every bit pattern (0/1 for bool), so NaN payloads and signed zeros are covered.
Tensor random_bytes_tensor(const Shape& shape, DType dtype, std::mt19937_64& rng) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i) {
    p[i] = dtype == DType::Bool ? static_cast<uint8_t>(rng() & 1u) : static_cast<uint8_t>(rng());
  }
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

StateDict every_dtype_state(std::mt19937_64& rng) {
  StateDict sd;
  for (DType d : kRealDTypes) {
    sd.emplace_back(std::string("t.") + std::string(dtype_name(d)), random_bytes_tensor({3, 5}, d, rng));
  }
  sd.emplace_back("scalar", random_bytes_tensor({}, DType::Float64, rng));
  sd.emplace_back("empty", Tensor::empty({0, 4}, DType::Float32));
  sd.emplace_back("deep", random_bytes_tensor({2, 1, 3, 1, 2}, DType::Int32, rng));
  sd.emplace_back("transposed", random_bytes_tensor({4, 6}, DType::Float32, rng).t());  // not contiguous
  sd.emplace_back("a name with spaces/and.dots and \xc3\xa9", random_bytes_tensor({2}, DType::UInt8, rng));
  return sd;
}

TEST_CASE("state-dict file: bit-exact round trip of every dtype, in order", "[nn][serialize]") {
  TempDir dir;
  std::mt19937_64 rng(42);
  const StateDict sd = every_dtype_state(rng);
  const std::string path = dir.file("all.brsd");
  save_state_dict(sd, path);
  const StateDict back = load_state_dict_file(path);
  REQUIRE(back.size() == sd.size());
  for (size_t i = 0; i < sd.size(); ++i) {
    INFO(sd[i].first);
    CHECK(back[i].first == sd[i].first);
    CHECK(back[i].second.is_contiguous());
    CHECK(back[i].second.device().is_cpu());
    CHECK(same_bytes(back[i].second, sd[i].second));
  }
  // The file is exactly what the spec says.
  std::vector<std::pair<std::string, Tensor>> entries(sd.begin(), sd.end());
  CHECK(read_bytes(path) == build_file(entries));

  // An empty state dict is a valid file too.
  save_state_dict({}, dir.file("empty.brsd"));
  CHECK(load_state_dict_file(dir.file("empty.brsd")).empty());
  CHECK(read_bytes(dir.file("empty.brsd")).size() == 20);
}

TEST_CASE("state-dict file: Module save/load into a fresh model keeps handles", "[nn][serialize]") {
  TempDir dir;
  Generator g1(1), g2(2);
  Sequential a{std::make_shared<Embedding>(7, 3, &g1), std::make_shared<LayerNorm>(3),
               std::make_shared<Linear>(3, 2, true, &g1)};
  Sequential b{std::make_shared<Embedding>(7, 3, &g2), std::make_shared<LayerNorm>(3),
               std::make_shared<Linear>(3, 2, true, &g2)};
  a.to(DType::Float64);
  b.to(DType::Float64);
  const Tensor handle = b.parameter("2.weight");
  REQUIRE_FALSE(equal(a.parameter("2.weight"), handle));
  save(a, dir.file("model.brsd"));
  load(b, dir.file("model.brsd"));
  CHECK(b.parameter("2.weight").is_same(handle));
  for (auto& [n, t] : a.state_dict()) CHECK(same_bytes(t, b.parameter(n)));

  // Strict loading into a different architecture names the keys.
  MLP other({3, 2});
  CHECK_THROWS_WITH(load(other, dir.file("model.brsd")),
                    Catch::Contains("Missing key(s) in state_dict: \"0.bias\"") &&
                        Catch::Contains("Unexpected key(s) in state_dict: \"1.weight\", \"1.bias\", \"2.weight\""));
  // Non-strict: the shared key "0.weight" has another shape, and that is still an error.
  CHECK_THROWS_WITH(load(other, dir.file("model.brsd"), /*strict=*/false),
                    Catch::Contains("size mismatch for 0.weight"));
  // Non-strict loading into a model that is a prefix of the saved one loads the overlap.
  Sequential partial{std::make_shared<Embedding>(7, 3)};
  partial.to(DType::Float64);
  load(partial, dir.file("model.brsd"), /*strict=*/false);
  CHECK(equal(partial.parameter("0.weight"), a.parameter("0.weight")));
}

TEST_CASE("state-dict file: saving replaces atomically and refuses bad entries up front", "[nn][serialize]") {
  TempDir dir;
  const std::string path = dir.file("w.brsd");
  save_state_dict({{"x", full({2}, 1.0)}}, path);
  save_state_dict({{"x", full({3}, 2.0)}, {"y", zeros({1})}}, path);
  const StateDict back = load_state_dict_file(path);
  REQUIRE(back.size() == 2);
  CHECK(values_of(back[0].second) == std::vector<double>{2, 2, 2});
  // No temporary files are left behind.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 1);

  const Bytes before = read_bytes(path);
  CHECK_THROWS_WITH(save_state_dict({{"a", zeros({1})}, {"a", zeros({1})}}, path),
                    Catch::Contains("duplicate name 'a'") && Catch::Contains(path));
  CHECK_THROWS_WITH(save_state_dict({{"", zeros({1})}}, path), Catch::Contains("empty name"));
  CHECK_THROWS_WITH(save_state_dict({{"u", Tensor()}}, path), Catch::Contains("'u' is an undefined tensor"));
  const Tensor sparse = SparseTensor(from_vector<int64_t>({0, 2}, {1, 2}), ones({2}), {4}).to_tensor();
  CHECK_THROWS_WITH(save_state_dict({{"s", sparse}}, path), Catch::Contains("sparse"));
  CHECK(read_bytes(path) == before);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 1);

  const std::string nowhere = dir.file("no/such/dir/w.brsd");
  CHECK_THROWS_WITH(save_state_dict({{"x", zeros({1})}}, nowhere), Catch::Contains(nowhere));
}

TEST_CASE("state-dict file: every truncation and every flipped byte is rejected", "[nn][serialize]") {
  TempDir dir;
  std::mt19937_64 rng(7);
  StateDict sd = {{"w", random_bytes_tensor({2, 3}, DType::Float32, rng)},
                  {"b", random_bytes_tensor({3}, DType::Float16, rng)},
                  {"n", random_bytes_tensor({}, DType::Int64, rng)}};
  const std::string good = dir.file("good.brsd");
  save_state_dict(sd, good);
  const Bytes bytes = read_bytes(good);
  const std::string path = dir.file("bad.brsd");

  for (size_t len = 0; len < bytes.size(); ++len) {
    INFO("truncated to " << len << " of " << bytes.size() << " bytes");
    write_bytes(path, Bytes(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len)));
    CHECK_THROWS_AS(load_state_dict_file(path), InvalidArgument);
    CHECK_THROWS_WITH(load_state_dict_file(path), Catch::Contains(path));
  }
  for (size_t at = 0; at < bytes.size(); ++at) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      INFO("byte " << at << " xor " << int(mask));
      Bytes bad = bytes;
      bad[at] ^= mask;
      write_bytes(path, bad);
      CHECK_THROWS_AS(load_state_dict_file(path), InvalidArgument);
    }
  }
  // An appended byte breaks the checksum as well.
  Bytes longer = bytes;
  longer.push_back(0);
  write_bytes(path, longer);
  CHECK_THROWS_AS(load_state_dict_file(path), InvalidArgument);
  // The intact file still loads.
  CHECK(load_state_dict_file(good).size() == 3);
}

TEST_CASE("state-dict file: each error names the path and what is wrong", "[nn][serialize]") {
  TempDir dir;
  const std::string path = dir.file("f.brsd");
  const std::vector<std::pair<std::string, Tensor>> entries = {{"a", ones({2})}, {"b", zeros({1}, DType::Int64)}};
  REQUIRE_NOTHROW(write_bytes(path, build_file(entries)));
  REQUIRE(load_state_dict_file(path).size() == 2);
  auto fails_with = [&](const Bytes& b, const std::string& what) {
    write_bytes(path, b);
    CHECK_THROWS_WITH(load_state_dict_file(path), Catch::Contains(what) && Catch::Contains(path));
  };

  SECTION("bad magic") {
    Bytes b = build_file(entries);
    b[0] = 'X';
    fails_with(b, "bad magic");
    fails_with(Bytes(64, 'x'), "bad magic");
    // A bare tensor file is not a state-dict file.
    fails_with(serialize(ones({2})), "bad magic");
  }
  SECTION("truncated") {
    fails_with({}, "truncated");
    fails_with({'B', 'R'}, "truncated");
    Bytes b = build_file(entries);
    fails_with(Bytes(b.begin(), b.begin() + 10), "truncated");
    b.resize(b.size() - 7);
    fails_with(b, "truncated or corrupt");
  }
  SECTION("version and flags") {
    fails_with(build_file(entries, 2), "unsupported format version 2");
    fails_with(build_file(entries, 0), "unsupported format version 0");
    fails_with(build_file(entries, 1, 1), "unsupported flags");
  }
  SECTION("checksum") {
    Bytes b = build_file(entries);
    b[b.size() - 10] ^= 0x10;  // inside the last payload
    fails_with(b, "checksum mismatch");
    b = build_file(entries);
    b.back() ^= 0x01;  // the stored checksum itself
    fails_with(b, "checksum mismatch");
  }
  SECTION("malformed but correctly checksummed") {
    fails_with(build_file({{"a", ones({2})}, {"a", ones({2})}}), "duplicate name 'a'");
    fails_with(build_file(entries, 1, 0, 3), "entry 2 of 3 is truncated");  // more entries than there are
    fails_with(build_file(entries, 1, 0, 1), "unexpected bytes");  // fewer
    fails_with(build_file(entries, 1, 0, UINT64_MAX - 1), "does not fit");
    fails_with(build_file(entries, 1, 0, UINT64_MAX, {0, 0, 0}), "unexpected bytes");
    fails_with(build_file({{"", ones({1})}}), "bad name length");
    // A tensor whose own header is broken: the error says which entry.
    Bytes b;
    put<uint32_t>(b, 0x44535242);
    put<uint16_t>(b, 1);
    put<uint16_t>(b, 0);
    put<uint64_t>(b, 1);
    put<uint32_t>(b, 3);
    b.insert(b.end(), {'w', 'h', 'o'});
    Bytes t = serialize(ones({4}));
    t[0] = 'Z';  // the tensor's magic
    b.insert(b.end(), t.begin(), t.end());
    put<uint32_t>(b, ref_crc32(b.data(), b.size()));
    fails_with(b, "tensor 'who'");
  }
  SECTION("missing file") {
    CHECK_THROWS_WITH(load_state_dict_file(dir.file("absent.brsd")),
                      Catch::Contains("cannot open") && Catch::Contains("absent.brsd"));
  }
}

}  // namespace
}  // namespace braid::nn
