// safetensors files that are wrong in one way each, built byte by byte (not with braid's writer): every
// one is refused with an InvalidArgument that names the file and, where it is about a tensor, the tensor.
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "nn/safetensors.h"
#include "tests/unit/nn/nn_test_util.h"
#include "tests/unit/nn/safetensors_test_util.h"

namespace braid::nn {
namespace {

using testing::Bytes;
using testing::TempDir;
using testing::get_u64;
using testing::put_u64;
using testing::random_bytes_tensor;
using testing::read_bytes;
using testing::st_bytes;
using testing::write_bytes;

// A directory holding one bad file at a time; each check wants the path and every given piece of text.
struct Malformed {
  TempDir dir;
  std::string path = dir.file("bad.safetensors");

  void fails_with(const Bytes& b, const std::vector<std::string>& what) {
    write_bytes(path, b);
    CHECK_THROWS_AS(SafetensorsFile(path), InvalidArgument);
    try {
      (void)load_safetensors(path);
    } catch (const InvalidArgument& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK(msg.find(path) != std::string::npos);
      for (const auto& w : what) CHECK(msg.find(w) != std::string::npos);
    }
  }
  // One F32 tensor 'a' of shape [2] over an 8-byte buffer, with `entry` replacing its JSON.
  void entry_fails_with(const std::string& entry, const std::vector<std::string>& what) {
    fails_with(st_bytes("{\"a\":" + entry + "}", Bytes(8, 0)), what);
  }
};

const std::string kGoodEntry = R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

TEST_CASE("safetensors malformed: the baseline file is good", "[nn][safetensors]") {
  Malformed m;
  write_bytes(m.path, st_bytes("{\"a\":" + kGoodEntry + "}", Bytes(8, 0)));
  CHECK(load_safetensors(m.path).size() == 1);
}

TEST_CASE("safetensors malformed: truncated file", "[nn][safetensors]") {
  Malformed m;
  m.fails_with({}, {"file is truncated (0 bytes"});
  m.fails_with({1, 0, 0}, {"file is truncated (3 bytes"});
  m.fails_with(Bytes(7, 0), {"file is truncated (7 bytes"});
  // Every prefix of a good file fails cleanly.
  const Bytes good = st_bytes("{\"a\":" + kGoodEntry + "}", Bytes(8, 0));
  for (size_t len = 0; len < good.size(); ++len) {
    INFO("truncated to " << len);
    write_bytes(m.path, Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(len)));
    CHECK_THROWS_AS(load_safetensors(m.path), InvalidArgument);
  }
}

TEST_CASE("safetensors malformed: header length past the end of the file", "[nn][safetensors]") {
  Malformed m;
  m.fails_with(st_bytes("{}", {}, 100), {"header length 100 runs past the end of the file (10 bytes)"});
  m.fails_with(st_bytes("{}", {}, uint64_t{1} << 63), {"header length 9223372036854775808 runs past the end"});
  m.fails_with(st_bytes("{}", {}, UINT64_MAX), {"header length 18446744073709551615 runs past the end"});
  m.fails_with(st_bytes("", {}), {"not valid JSON"});  // length 0: an empty header
}

TEST_CASE("safetensors malformed: header length over the limit", "[nn][safetensors]") {
  Malformed m;
  // A sparse file: the reader must refuse on the length alone, without reading 100 MB.
  Bytes b;
  put_u64(b, 100'000'001);
  write_bytes(m.path, b);
  std::filesystem::resize_file(m.path, 8 + 100'000'001);
  CHECK_THROWS_WITH(load_safetensors(m.path), Catch::Contains("header length 100000001 exceeds the limit of "
                                                              "100000000 bytes") && Catch::Contains(m.path));
}

TEST_CASE("safetensors malformed: invalid JSON", "[nn][safetensors]") {
  Malformed m;
  m.fails_with(st_bytes(R"({"a":)", {}), {"header is not valid JSON"});
  m.fails_with(st_bytes(R"({"a":{"dtype":"F32",}})", {}), {"header is not valid JSON"});
  // A number past a double's range: nlohmann's out_of_range, not a parse_error (found by fuzz_safetensors).
  m.fails_with(st_bytes(R"({"a":888888E000000088888})", {}), {"header is not valid JSON", "number overflow"});
  m.fails_with(st_bytes("{\"\xff\":1}", {}), {"header is not valid JSON"});  // not UTF-8
  m.fails_with(st_bytes("{} {}", {}), {"header is not valid JSON"});
}

TEST_CASE("safetensors malformed: header not an object", "[nn][safetensors]") {
  Malformed m;
  m.fails_with(st_bytes("[1, 2]  ", {}), {"header is a JSON array, not an object"});
  m.fails_with(st_bytes(R"("x")", {}), {"header is a JSON string, not an object"});
  m.fails_with(st_bytes("null", {}), {"header is a JSON null, not an object"});
}

TEST_CASE("safetensors malformed: an entry that is not an object", "[nn][safetensors]") {
  Malformed m;
  m.entry_fails_with("5", {"tensor 'a': entry is a JSON number, not an object"});
  m.entry_fails_with("[0, 8]", {"tensor 'a': entry is a JSON array, not an object"});
}

TEST_CASE("safetensors malformed: missing or extra keys", "[nn][safetensors]") {
  Malformed m;
  m.entry_fails_with(R"({"dtype":"F32","data_offsets":[0,8]})", {"tensor 'a': missing key 'shape'"});
  m.entry_fails_with(R"({"shape":[2],"data_offsets":[0,8]})", {"tensor 'a': missing key 'dtype'"});
  m.entry_fails_with(R"({"dtype":"F32","shape":[2]})", {"tensor 'a': missing key 'data_offsets'"});
  m.entry_fails_with(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8],"offset":0})",
                     {"tensor 'a': unexpected key 'offset'"});
}

TEST_CASE("safetensors malformed: keys of the wrong type", "[nn][safetensors]") {
  Malformed m;
  m.entry_fails_with(R"({"dtype":5,"shape":[2],"data_offsets":[0,8]})", {"tensor 'a': dtype is a JSON number"});
  m.entry_fails_with(R"({"dtype":"F32","shape":"2","data_offsets":[0,8]})", {"tensor 'a': shape is a JSON string"});
  m.entry_fails_with(R"({"dtype":"F32","shape":[2],"data_offsets":{"b":0}})", {"tensor 'a': data_offsets must be"});
}

TEST_CASE("safetensors malformed: unknown dtype", "[nn][safetensors]") {
  Malformed m;
  const std::string accepted = "accepted: BOOL, U8, I8, I32, I64, F16, BF16, F32, F64";
  m.entry_fails_with(R"({"dtype":"F128","shape":[2],"data_offsets":[0,8]})",
                     {"tensor 'a': unknown dtype 'F128'", accepted});
  m.entry_fails_with(R"({"dtype":"f32","shape":[2],"data_offsets":[0,8]})", {"unknown dtype 'f32'", accepted});
  // A real safetensors dtype braid lacks.
  m.entry_fails_with(R"({"dtype":"I16","shape":[4],"data_offsets":[0,8]})",
                     {"tensor 'a': braid has no tensor type for dtype 'I16'", accepted});
}

TEST_CASE("safetensors malformed: negative or non-integer shape dims", "[nn][safetensors]") {
  Malformed m;
  m.entry_fails_with(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})",
                     {"tensor 'a': shape dimension 0 is negative (-2)"});
  m.entry_fails_with(R"({"dtype":"F32","shape":[1,2.5],"data_offsets":[0,8]})",
                     {"tensor 'a': shape dimension 1 is not a non-negative integer (2.5)"});
  m.entry_fails_with(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})", {"shape dimension 0 is not"});
  m.entry_fails_with(R"({"dtype":"F32","shape":["2"],"data_offsets":[0,8]})", {"shape dimension 0 is not"});
  m.entry_fails_with(R"({"dtype":"F32","shape":[null],"data_offsets":[0,8]})", {"shape dimension 0 is not"});
  m.entry_fails_with(R"({"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,8]})",
                     {"shape dimension 0 is not"});  // 2^64 parses as a float
  m.entry_fails_with(R"({"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,8]})", {"is too large"});
  m.entry_fails_with(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})", {"is too large"});
  // Zero elements but huge dims would overflow the strides.
  m.entry_fails_with(R"({"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]})", {"is too large"});
}

TEST_CASE("safetensors malformed: data_offsets not two integers", "[nn][safetensors]") {
  Malformed m;
  const std::string what = "tensor 'a': data_offsets must be two non-negative integers [begin, end]";
  for (const char* offsets : {"[8]", "[0,8,8]", "[]", "[0,\"8\"]", "[0,8.0]", "[-1,8]", "\"0-8\"", "null"}) {
    INFO(offsets);
    m.entry_fails_with(std::string(R"({"dtype":"F32","shape":[2],"data_offsets":)") + offsets + "}", {what});
  }
}

TEST_CASE("safetensors malformed: begin after end", "[nn][safetensors]") {
  Malformed m;
  m.entry_fails_with(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})",
                     {"tensor 'a': data_offsets [8, 0] begin after they end"});
}

TEST_CASE("safetensors malformed: end past the data buffer", "[nn][safetensors]") {
  Malformed m;
  m.entry_fails_with(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})",
                     {"tensor 'a': data_offsets [0, 16] run past the end of the data buffer (8 bytes)"});
  m.entry_fails_with(R"({"dtype":"F32","shape":[2],"data_offsets":[18446744073709551607,18446744073709551615]})",
                     {"tensor 'a'", "run past the end of the data buffer"});
}

TEST_CASE("safetensors malformed: shape and byte count disagree", "[nn][safetensors]") {
  Malformed m;
  m.entry_fails_with(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})",
                     {"tensor 'a': shape [3] of F32 needs 12 bytes but data_offsets [0, 8] hold 8"});
  m.entry_fails_with(R"({"dtype":"F64","shape":[],"data_offsets":[0,4]})",
                     {"tensor 'a': shape [] of F64 needs 8 bytes but data_offsets [0, 4] hold 4"});
  m.entry_fails_with(R"({"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]})",
                     {"needs more than 2^64 bytes"});  // 2^61 elements of 8 bytes
}

TEST_CASE("safetensors malformed: overlapping tensors", "[nn][safetensors]") {
  Malformed m;
  m.fails_with(st_bytes(R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
                        R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                        Bytes(12, 0)),
               {"tensors 'a' (data_offsets [0, 8]) and 'b' ([4, 12]) overlap"});
  // The same bytes twice.
  m.fails_with(st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"I64","shape":[],"data_offsets":[0,8]}})",
                        Bytes(8, 0)),
               {"tensors 'a'", "and 'b'", "overlap"});
}

TEST_CASE("safetensors malformed: duplicate names and keys", "[nn][safetensors]") {
  Malformed m;
  m.fails_with(st_bytes("{\"a\":" + kGoodEntry + ",\"a\":" + kGoodEntry + "}", Bytes(8, 0)),
               {"duplicate tensor name 'a' in the header"});
  m.entry_fails_with(R"({"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]})",
                     {"tensor 'a': duplicate key 'dtype'"});
  m.fails_with(st_bytes(R"({"__metadata__":{"k":"1","k":"2"},"a":)" + kGoodEntry + "}", Bytes(8, 0)),
               {"__metadata__: duplicate key 'k'"});
  m.fails_with(st_bytes(R"({"__metadata__":{},"a":)" + kGoodEntry + R"(,"__metadata__":{}})", Bytes(8, 0)),
               {"duplicate tensor name '__metadata__'"});
}

TEST_CASE("safetensors malformed: __metadata__ not a string-to-string object", "[nn][safetensors]") {
  Malformed m;
  const auto with_metadata = [](const std::string& md) {
    return st_bytes(R"({"__metadata__":)" + md + R"(,"a":)" + kGoodEntry + "}", Bytes(8, 0));
  };
  m.fails_with(with_metadata(R"("pt")"), {"__metadata__ is a JSON string, not an object of strings"});
  m.fails_with(with_metadata("null"), {"__metadata__ is a JSON null, not an object of strings"});
  m.fails_with(with_metadata(R"({"format":"pt","n":1})"), {"__metadata__ entry 'n' is a JSON number, not a string"});
  m.fails_with(with_metadata(R"({"d":{"x":"y"}})"), {"__metadata__ entry 'd' is a JSON object, not a string"});
  // And a good one is read.
  write_bytes(m.path, with_metadata(R"({"format":"pt","":""})"));
  CHECK(SafetensorsFile(m.path).metadata() == std::map<std::string, std::string>{{"format", "pt"}, {"", ""}});
}

TEST_CASE("safetensors malformed: bytes that belong to no tensor", "[nn][safetensors]") {
  Malformed m;
  // A gap between tensors, before the first, and after the last (the reference's MetadataIncompleteBuffer).
  m.fails_with(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                        Bytes(12, 0)),
               {"data buffer bytes [4, 8) before tensor 'b' belong to no tensor"});
  m.entry_fails_with(R"({"dtype":"F32","shape":[1],"data_offsets":[4,8]})",
                     {"data buffer bytes [0, 4) before tensor 'a' belong to no tensor"});
  m.entry_fails_with(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})",
                     {"the last 4 bytes of the data buffer (8 bytes) belong to no tensor"});
  m.fails_with(st_bytes("{}", Bytes(3, 0)), {"the last 3 bytes of the data buffer (3 bytes) belong to no tensor"});
  // Empty tensors take no bytes and may sit anywhere between tensors.
  write_bytes(m.path, st_bytes(R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},"a":)" + kGoodEntry +
                                   R"(,"z":{"dtype":"I8","shape":[3,0],"data_offsets":[0,0]}})",
                               Bytes(8, 0)));
  const SafetensorsFile file(m.path);
  REQUIRE(file.entries().size() == 3);
  CHECK(file.entries()[0].name == "z");  // data order; ties would keep header order
  CHECK(file.entries()[1].name == "a");
  CHECK(file.entries()[2].name == "e");
  CHECK(file.tensor("z").shape() == Shape{3, 0});
}

TEST_CASE("safetensors malformed: BOOL bytes other than 0 and 1", "[nn][safetensors]") {
  Malformed m;
  m.fails_with(st_bytes(R"({"flags":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", {1, 2, 0}),
               {"tensor 'flags': BOOL element 1 is byte 2, not 0 or 1"});
}

TEST_CASE("safetensors malformed: missing file, directory, unknown name", "[nn][safetensors]") {
  Malformed m;
  CHECK_THROWS_WITH(SafetensorsFile(m.dir.file("absent.safetensors")),
                    Catch::Contains("cannot open") && Catch::Contains("absent.safetensors"));
  CHECK_THROWS_WITH(SafetensorsFile(m.dir.path().string()), Catch::Contains("not a regular file"));
  write_bytes(m.path, st_bytes("{\"a\":" + kGoodEntry + "}", Bytes(8, 0)));
  const SafetensorsFile file(m.path);
  CHECK_FALSE(file.contains("b"));
  CHECK_THROWS_WITH(file.tensor("b"), Catch::Contains("no tensor 'b'") && Catch::Contains(m.path));
}

TEST_CASE("safetensors malformed: random corruption never crashes", "[nn][safetensors]") {
  Malformed m;
  TempDir dir;
  std::mt19937_64 rng(3);
  save_safetensors({{"w", random_bytes_tensor({2, 3}, DType::Float32, rng)},
                    {"m", random_bytes_tensor({4}, DType::Bool, rng)},
                    {"s", random_bytes_tensor({}, DType::Int64, rng)}},
                   dir.file("good.safetensors"), {{"k", "v"}});
  const Bytes good = read_bytes(dir.file("good.safetensors"));
  // Every byte of the length and header, set to a few values: either the file still loads (a flipped
  // digit can give another valid file) or it is refused with InvalidArgument.
  const uint64_t header_end = 8 + get_u64(good.data());
  for (size_t at = 0; at < header_end; ++at) {
    for (uint8_t v : {uint8_t{0}, uint8_t{'"'}, uint8_t{'9'}, uint8_t{'-'}, uint8_t{'}'}, uint8_t{0xff}}) {
      Bytes bad = good;
      bad[at] = v;
      write_bytes(m.path, bad);
      try {
        (void)load_safetensors(m.path);
      } catch (const InvalidArgument&) {
      }
    }
  }
}

}  // namespace
}  // namespace braid::nn
