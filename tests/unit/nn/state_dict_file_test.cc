// State-dict files read on demand (nn/state_dict_file.h): the entries' headers without their payloads,
// one tensor at a time, and every way a file can be wrong found when opening or reading.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "nn/serialize.h"
#include "nn/state_dict_file.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/unit/nn/nn_test_util.h"

namespace braid::nn {
namespace {

using testing::Bytes;
using testing::read_bytes;
using testing::write_bytes;
using testing::TempDir;

StateDict sample() {
  return {{"w", arange(0, 6, 1, TensorOptions(DType::Float32)).view({2, 3})},
          {"b", full({3}, 0.5, TensorOptions(DType::Float64))},
          {"n", scalar_tensor(7, DType::Int64)}};
}

// Opens `path` and reads every entry; what it read, by name.
StateDict read_all(const std::string& path) {
  const StateDictFile f(path);
  StateDict out;
  for (const auto& e : f.entries()) out.emplace_back(e.name, f.read(e.name));
  return out;
}

}  // namespace

TEST_CASE("state-dict file on demand: headers first, then only the tensors asked for", "[nn][serialize]") {
  TempDir dir;
  const std::string path = dir.file("a.brsd");
  const StateDict sd = sample();
  save_state_dict(sd, path);
  const StateDictFile f(path);
  REQUIRE(f.entries().size() == 3);
  CHECK(f.entries()[0].name == "w");
  CHECK(f.entries()[0].header.shape == Shape{2, 3});
  CHECK(f.entries()[1].header.dtype == DType::Float64);
  CHECK(f.entries()[2].header.shape.empty());
  CHECK(f.payload_bytes_read() == 0);
  CHECK(f.find("missing") == nullptr);
  const Tensor b = f.read("b");
  CHECK(equal(b, sd[1].second));
  CHECK(f.payload_bytes_read() == 3 * 8);  // b's bytes, nothing of w's or n's
  CHECK(equal(f.read("w"), sd[0].second));
  CHECK(f.read("n").item<int64_t>() == 7);
  CHECK_THROWS_WITH(f.read("missing"), Catch::Contains(path) && Catch::Contains("no entry 'missing'"));
  // The same entries as the whole-file reader, in the same order.
  const StateDict whole = load_state_dict_file(path);
  const StateDict lazy = read_all(path);
  REQUIRE(lazy.size() == whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    CHECK(lazy[i].first == whole[i].first);
    CHECK(equal(lazy[i].second, whole[i].second));
  }
}

TEST_CASE("state-dict file on demand: truncations and flipped bytes never read as the original",
          "[nn][serialize]") {
  TempDir dir;
  const std::string good = dir.file("good.brsd");
  save_state_dict(sample(), good);
  const Bytes bytes = read_bytes(good);
  const std::string path = dir.file("bad.brsd");
  for (size_t len = 0; len < bytes.size(); ++len) {
    INFO("truncated to " << len << " of " << bytes.size() << " bytes");
    write_bytes(path, Bytes(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len)));
    CHECK_THROWS_WITH(read_all(path), Catch::Contains(path));
  }
  // A flipped byte fails the open or the read, or changes a name (names carry no checksum: the entry is then
  // missing under its own name); only the whole-file checksum at the end, which the on-demand reader does
  // not verify, may change unnoticed.
  const StateDict want = sample();
  for (size_t at = 0; at + 4 < bytes.size(); ++at) {
    INFO("byte " << at << " flipped");
    Bytes bad = bytes;
    bad[at] ^= 0x41;
    write_bytes(path, bad);
    bool failed = false;
    bool renamed = false;
    try {
      const StateDict got = read_all(path);
      for (size_t i = 0; i < got.size(); ++i) renamed = renamed || got[i].first != want[i].first;
    } catch (const InvalidArgument& e) {
      failed = std::string(e.what()).find(path) != std::string::npos;
    }
    CHECK((failed || renamed));
  }
  CHECK_THROWS_WITH(StateDictFile(dir.file("none.brsd")), Catch::Contains("cannot open"));
}

}  // namespace braid::nn
