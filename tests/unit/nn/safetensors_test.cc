// safetensors files: bit-exact round trips of every dtype, the file layout, mapped versus copied tensors
// and their lifetime, the writer's refusals, and files written by an independent writer from PyTorch's
// values (tests/fixtures/safetensors/, made by tests/fixtures/make_safetensors_fixtures.py). Malformed
// files: safetensors_malformed_test.cc.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "nn/activation.h"
#include "nn/container.h"
#include "nn/linear.h"
#include "nn/safetensors.h"
#include "tensor/sparse.h"
#include "tests/unit/nn/nn_test_util.h"
#include "tests/unit/nn/safetensors_test_util.h"

namespace braid::nn {
namespace {

using testing::Bytes;
using testing::TempDir;
using testing::fixture;
using testing::header_of;
using testing::random_bytes_tensor;
using testing::read_bytes;
using testing::same_bytes;
using testing::values_of;

TEST_CASE("safetensors: bit-exact round trip of every dtype, in order, with metadata", "[nn][safetensors]") {
  TempDir dir;
  std::mt19937_64 rng(42);
  StateDict sd;
  for (DType d : kRealDTypes) {
    sd.emplace_back("t." + std::string(dtype_name(d)), random_bytes_tensor({3, 5}, d, rng));
  }
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> specials = {nan, -nan, inf, -inf, -0.0, 0.0, 1e-310, -1.5};
  for (DType d : {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16}) {
    sd.emplace_back("special." + std::string(dtype_name(d)), from_vector(specials).to(d));
  }
  sd.emplace_back("odd.half", random_bytes_tensor({3}, DType::Float16, rng));  // 6 bytes: misaligns what follows
  sd.emplace_back("transposed", random_bytes_tensor({4, 6}, DType::Float32, rng).t());  // not contiguous
  sd.emplace_back("scalar", random_bytes_tensor({}, DType::Float64, rng));
  sd.emplace_back("empty", Tensor::empty({2, 0, 3}, DType::Int64));
  sd.emplace_back("deep", random_bytes_tensor({2, 1, 3, 1, 2}, DType::Int32, rng));
  sd.emplace_back("a name with spaces/and.dots, \"quotes\" and \xc3\xa9", random_bytes_tensor({2}, DType::UInt8, rng));
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "caf\xc3\xa9 \"quoted\"\n"}};

  const std::string path = dir.file("all.safetensors");
  save_safetensors(sd, path, metadata);

  const StateDict back = load_safetensors(path);
  REQUIRE(back.size() == sd.size());
  for (size_t i = 0; i < sd.size(); ++i) {
    INFO(sd[i].first);
    CHECK(back[i].first == sd[i].first);
    CHECK(back[i].second.is_contiguous());
    CHECK(back[i].second.device().is_cpu());
    CHECK(same_bytes(back[i].second, sd[i].second));
  }
  const SafetensorsFile file(path);
  CHECK(file.metadata() == metadata);
  CHECK(file.entry("scalar").shape.empty());
  CHECK(file.entry("empty").shape == Shape{2, 0, 3});
  CHECK(file.entry("t.bfloat16").dtype == DType::BFloat16);

  // The layout: a padded header, tensors back to back in state-dict order, their bytes as stored.
  const Bytes bytes = read_bytes(path);
  uint64_t data_start = 0;
  const nlohmann::json header = header_of(bytes, &data_start);
  CHECK(data_start % 8 == 0);
  CHECK(header["__metadata__"] == nlohmann::json(metadata));
  uint64_t offset = 0;
  for (const auto& [name, t] : sd) {
    INFO(name);
    const auto& e = header.at(name);
    CHECK(e.size() == 3);
    CHECK(e["shape"].get<Shape>() == t.shape());
    const auto begin = e["data_offsets"][0].get<uint64_t>(), end = e["data_offsets"][1].get<uint64_t>();
    CHECK(begin == offset);
    CHECK(end - begin == t.nbytes());
    const Tensor c = t.contiguous();
    CHECK(std::memcmp(bytes.data() + data_start + begin, c.data_ptr(), c.nbytes()) == 0);
    offset = end;
  }
  CHECK(data_start + offset == bytes.size());
  const std::map<std::string, std::string> names = {{"t.bool", "BOOL"},       {"t.uint8", "U8"},
                                                    {"t.int8", "I8"},         {"t.int32", "I32"},
                                                    {"t.int64", "I64"},       {"t.float16", "F16"},
                                                    {"t.bfloat16", "BF16"},   {"t.float32", "F32"},
                                                    {"t.float64", "F64"}};
  for (const auto& [name, code] : names) CHECK(header[name]["dtype"] == code);

  // No metadata, no "__metadata__"; an empty state dict is a valid file.
  save_safetensors({{"x", zeros({2})}}, dir.file("plain.safetensors"));
  CHECK_FALSE(header_of(read_bytes(dir.file("plain.safetensors"))).contains("__metadata__"));
  save_safetensors({}, dir.file("none.safetensors"));
  CHECK(load_safetensors(dir.file("none.safetensors")).empty());
  CHECK(read_bytes(dir.file("none.safetensors")).size() == 16);  // "{}" padded to 8
}

TEST_CASE("safetensors: aligned tensors map the file, misaligned ones are copies", "[nn][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  // u8[3] then f32[2]: the floats start at data offset 3, not 4-aligned.
  save_safetensors({{"bytes", from_vector<uint8_t>({1, 2, 3})}, {"floats", from_vector<float>({1.5f, -2.0f})}}, path);
  const Bytes before = read_bytes(path);
  StateDict sd;
  {
    const SafetensorsFile file(path);
    // Two tensors of one mapped entry share its memory; copies do not.
    CHECK(file.tensor("bytes").data_ptr() == file.tensor("bytes").data_ptr());
    CHECK(file.tensor("floats").data_ptr() != file.tensor("floats").data_ptr());
    sd = file.state_dict();
  }
  // The file object is gone; its tensors keep the mapping alive.
  CHECK(values_of(sd[0].second) == std::vector<double>{1, 2, 3});
  CHECK(values_of(sd[1].second) == std::vector<double>{1.5, -2.0});
  // Writing into a mapped tensor is private: the file keeps its bytes.
  sd[0].second.fill_(7);
  CHECK(values_of(sd[0].second) == std::vector<double>{7, 7, 7});
  CHECK(read_bytes(path) == before);
  CHECK(values_of(load_safetensors(path)[0].second) == std::vector<double>{1, 2, 3});
  // Replacing the file (save renames a new one into place) does not disturb the mapped tensors.
  save_safetensors({{"bytes", from_vector<uint8_t>({9, 9, 9})}}, path);
  CHECK(values_of(sd[0].second) == std::vector<double>{7, 7, 7});
}

TEST_CASE("safetensors: saving refuses bad entries up front and replaces atomically", "[nn][safetensors]") {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  save_safetensors({{"x", full({2}, 1.0)}}, path);
  const Bytes before = read_bytes(path);
  auto refused = [&](const StateDict& sd, const std::string& what, const std::map<std::string, std::string>& md = {}) {
    CHECK_THROWS_AS(save_safetensors(sd, path, md), InvalidArgument);
    CHECK_THROWS_WITH(save_safetensors(sd, path, md), Catch::Contains(what) && Catch::Contains(path));
  };
  refused({{"a", zeros({1})}, {"a", zeros({1})}}, "duplicate name 'a'");
  refused({{"", zeros({1})}}, "empty name");
  refused({{"__metadata__", zeros({1})}}, "'__metadata__' is reserved");
  refused({{"u", Tensor()}}, "'u' is an undefined tensor");
  refused({{"s", SparseTensor(from_vector<int64_t>({0, 2}, {1, 2}), ones({2}), {4}).to_tensor()}}, "'s' is a sparse");
  refused({{"bad\xff", zeros({1})}}, "is not valid UTF-8");
  refused({{"x", zeros({1})}}, "metadata entry 'k' is not valid UTF-8", {{"k", "\xc3"}});
  CHECK(read_bytes(path) == before);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 1);

  save_safetensors({{"x", full({3}, 2.0)}, {"y", zeros({1})}}, path);
  CHECK(load_safetensors(path).size() == 2);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 1);
  const std::string nowhere = dir.file("no/such/dir/w.safetensors");
  CHECK_THROWS_WITH(save_safetensors({{"x", zeros({1})}}, nowhere), Catch::Contains(nowhere));
}

// -------------------------------------------------------------------------------------- PyTorch's fixtures

// The raw bytes of `name` in `file`, found through the test's own parse of the header.
Bytes raw_entry(const Bytes& file, const std::string& name) {
  uint64_t data_start = 0;
  const nlohmann::json header = header_of(file, &data_start);
  const auto begin = header.at(name).at("data_offsets")[0].get<uint64_t>();
  const auto end = header.at(name).at("data_offsets")[1].get<uint64_t>();
  return Bytes(file.begin() + static_cast<std::ptrdiff_t>(data_start + begin),
               file.begin() + static_cast<std::ptrdiff_t>(data_start + end));
}

bool equals_raw(const Tensor& t, const Bytes& raw) {
  const Tensor c = t.contiguous();
  return c.nbytes() == raw.size() && std::memcmp(c.data_ptr(), raw.data(), raw.size()) == 0;
}

TEST_CASE("safetensors fixture: PyTorch's MLP loads into nn::Sequential and gives PyTorch's output",
          "[nn][safetensors]") {
  const std::string path = fixture("mlp.safetensors");
  const SafetensorsFile file(path);
  CHECK(file.metadata() == std::map<std::string, std::string>{{"format", "pt"}});
  std::vector<std::string> names;
  for (const auto& e : file.entries()) names.push_back(e.name);
  // The header lists keys sorted; the data is in state-dict order, and so are the entries.
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});

  Sequential model{std::make_shared<Linear>(16, 32), std::make_shared<ReLU>(), std::make_shared<Linear>(32, 4)};
  model.load_state_dict(file.state_dict());
  const Bytes bytes = read_bytes(path);
  for (const auto& name : names) {
    INFO(name);
    CHECK(model.parameter(name).dtype() == DType::Float32);
    CHECK(equals_raw(model.parameter(name), raw_entry(bytes, name)));
  }
  CHECK(model.parameter("0.weight").shape() == Shape{32, 16});
  CHECK(model.parameter("2.bias").shape() == Shape{4});

  const SafetensorsFile io(fixture("mlp_io.safetensors"));
  const Tensor x = io.tensor("input"), want = io.tensor("output");
  REQUIRE(x.shape() == Shape{8, 16});
  REQUIRE(want.shape() == Shape{8, 4});
  autograd::NoGradGuard no_grad;
  const Tensor y = model(x);
  REQUIRE(y.shape() == want.shape());
  const std::vector<double> got = values_of(y), expected = values_of(want);
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("output element " << i);
    CHECK(got[i] == Approx(expected[i]).epsilon(1e-6));
  }
}

TEST_CASE("safetensors fixture: every dtype reads as PyTorch wrote it", "[nn][safetensors]") {
  const SafetensorsFile file(fixture("dtypes.safetensors"));
  std::ifstream in(fixture("dtypes.json"));
  const nlohmann::json record = nlohmann::json::parse(in);
  const auto& tensors = record.at("tensors");
  REQUIRE(file.entries().size() == tensors.size());
  const std::map<std::string, DType> dtypes = {{"BOOL", DType::Bool},     {"U8", DType::UInt8},
                                               {"I8", DType::Int8},       {"I32", DType::Int32},
                                               {"I64", DType::Int64},     {"F16", DType::Float16},
                                               {"BF16", DType::BFloat16}, {"F32", DType::Float32},
                                               {"F64", DType::Float64}};
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& r = tensors[i];
    const auto name = r.at("name").get<std::string>();
    INFO(name);
    CHECK(file.entries()[i].name == name);  // entries in data order
    const Tensor t = file.tensor(name);
    CHECK(t.dtype() == dtypes.at(r.at("dtype").get<std::string>()));
    CHECK(t.shape() == r.at("shape").get<Shape>());
    // Bit patterns, element by element.
    const auto bits = r.at("bits").get<std::vector<uint64_t>>();
    REQUIRE(bits.size() == static_cast<size_t>(t.numel()));
    const auto* p = static_cast<const uint8_t*>(t.data_ptr());
    for (size_t k = 0; k < bits.size(); ++k) {
      uint64_t v = 0;
      for (size_t b = 0; b < t.element_size(); ++b) v |= static_cast<uint64_t>(p[k * t.element_size() + b]) << (8 * b);
      CHECK(v == bits[k]);
    }
    // Values as braid reads them, against PyTorch's reading of the same bits.
    const auto& values = r.at("values");
    if (is_floating(t.dtype())) {
      const std::vector<double> got = to_vector<double>(t);
      for (size_t k = 0; k < got.size(); ++k) {
        const auto& v = values[k];
        if (v.is_string()) {
          const auto s = v.get<std::string>();
          if (s == "nan") CHECK(std::isnan(got[k]));
          else CHECK(got[k] == (s == "inf" ? 1 : -1) * std::numeric_limits<double>::infinity());
        } else {
          CHECK(got[k] == v.get<double>());
          CHECK(std::signbit(got[k]) == std::signbit(v.get<double>()));
        }
      }
    } else if (t.dtype() == DType::Bool) {
      std::vector<int64_t> want;
      for (const auto& v : values) want.push_back(v.get<bool>() ? 1 : 0);
      CHECK(to_vector<int64_t>(t) == want);
    } else {
      CHECK(to_vector<int64_t>(t) == values.get<std::vector<int64_t>>());
    }
  }
  // Where the data lies decides mapping or copying: f64 at data offset 0 is mapped, the F32 scalar at
  // offset 135 is copied.
  CHECK(file.tensor("f64").data_ptr() == file.tensor("f64").data_ptr());
  CHECK(file.tensor("scalar").data_ptr() != file.tensor("scalar").data_ptr());
  CHECK(file.tensor("scalar").item<float>() == -3.25f);
}

}  // namespace
}  // namespace braid::nn
