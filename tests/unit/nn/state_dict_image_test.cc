// A state-dict file built in memory and written with O_DIRECT (nn/state_dict_image.h): byte for byte the
// file save_state_dict writes, with or without O_DIRECT, its memory kept while the layout stays.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "nn/serialize.h"
#include "nn/state_dict_image.h"
#include "tensor/factory.h"
#include "tests/unit/nn/nn_test_util.h"

namespace braid::nn {
namespace {

using testing::read_bytes;
using testing::TempDir;

StateDict sample(float base) {
  // 2.4 MiB: a block of braid's allocator aligned for O_DIRECT.
  return {{"layer.weight", full({600, 1024}, base, TensorOptions(DType::Float32))},
          {"layer.bias", arange(0, 5, 1, TensorOptions(DType::Float64))},
          {"empty", zeros({0, 3})},
          {"step", scalar_tensor(int64_t{12}, DType::Int64)},
          {"mask", ones({3}, TensorOptions(DType::Bool))}};
}

}  // namespace

TEST_CASE("state-dict image: the same bytes as save_state_dict, direct or not", "[nn][serialize]") {
  TempDir dir;
  const StateDict sd = sample(0.25f);
  const std::string want = dir.file("want.brsd");
  save_state_dict(sd, want);
  StateDictImage image;
  image.layout(sd, "x");
  for (size_t i = 0; i < sd.size(); ++i) image.fill(i, sd[i].second);
  image.seal();
  CHECK(image.file_bytes() == read_bytes(want).size());
  CHECK(image.capacity() % 4096 == 0);
  for (const bool direct : {true, false}) {
    INFO("direct " << direct);
    const std::string got = dir.file(direct ? "direct.brsd" : "buffered.brsd");
    image.write(got, direct);
    CHECK(read_bytes(got) == read_bytes(want));
  }
  // Another checkpoint of the same layout keeps the memory; new values, new bytes.
  const uint64_t capacity = image.capacity();
  const StateDict next = sample(-3.0f);
  image.layout(next, "x");
  CHECK(image.capacity() == capacity);
  for (size_t i = 0; i < next.size(); ++i) image.fill(i, next[i].second);
  image.seal();
  image.write(dir.file("next.brsd"));
  save_state_dict(next, want);
  CHECK(read_bytes(dir.file("next.brsd")) == read_bytes(want));
  CHECK(load_state_dict_file(dir.file("next.brsd")).size() == next.size());
  // A value of another shape or dtype than laid out is refused, naming the entry.
  CHECK_THROWS_WITH(image.fill(0, zeros({2})), Catch::Contains("'layer.weight'"));
  CHECK_THROWS_WITH(image.layout({{"a", Tensor()}}, "the/file"), Catch::Contains("the/file") &&
                                                                    Catch::Contains("undefined tensor"));
}

}  // namespace braid::nn
