// broadcast_coalesced on one process: the bucketing rules and the pack/unpack round trip.
#include <catch2/catch.hpp>

#include "collectives/registry/coalesced.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/unit/collectives_registry/fake_engine.h"

using namespace braid;
using namespace braid::collectives;
using Catch::Contains;
using Buckets = std::vector<std::vector<size_t>>;

TEST_CASE("broadcast_coalesced: buckets by dtype, in list order, closed at the size limit",
          "[collectives][coalesced]") {
  // float32 x 4 elements = 16 bytes each.
  const TensorList t{zeros({4}), zeros({4}, DType::Int64), zeros({4}), zeros({4}), zeros({4}, DType::Int64),
                     zeros({4})};
  REQUIRE(coalesce_buckets(t, 1 << 20) == Buckets{{0, 2, 3, 5}, {1, 4}});
  // 32 bytes: a bucket closes once it holds at least the limit (an int64 tensor fills one alone).
  REQUIRE(coalesce_buckets(t, 32) == Buckets{{0, 2}, {1}, {3, 5}, {4}});
  REQUIRE(coalesce_buckets(t, 48) == Buckets{{0, 2, 3}, {1, 4}, {5}});
  // A tensor larger than the limit travels alone.
  REQUIRE(coalesce_buckets(t, 1) == Buckets{{0}, {1}, {2}, {3}, {4}, {5}});
  REQUIRE(coalesce_buckets({}, 16).empty());
}

TEST_CASE("broadcast_coalesced: non-roots unpack every bucket into their tensors", "[collectives][coalesced]") {
  // Rank 1 of 2 with a broadcast that writes 0, 1, 2, ... into each flat buffer.
  auto pg = testing::fake_group(1, 2, "pattern", nullptr, /*pattern_broadcast=*/true);
  Tensor strided = zeros({3, 2}).t();  // non-contiguous
  TensorList t{zeros({2, 2}), zeros({3}, DType::Int64), strided, zeros({1}, DType::Int64)};
  broadcast_coalesced(*pg, t, 1 << 20, 0);
  REQUIRE(equal(t[0], from_vector<float>({0, 1, 2, 3}, {2, 2})));
  REQUIRE(equal(t[1], from_vector<int64_t>({0, 1, 2})));
  REQUIRE(equal(t[2], from_vector<float>({4, 5, 6, 7, 8, 9}, {2, 3})));
  REQUIRE(equal(t[3], from_vector<int64_t>({3}, {1})));
  REQUIRE(pg->sequence_number() == 2);  // two buckets

  // Small buffers: one broadcast per tensor, each starting at 0.
  broadcast_coalesced(*pg, t, 1, 0);
  REQUIRE(equal(t[2], from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3})));
  REQUIRE(pg->sequence_number() == 6);
}

TEST_CASE("broadcast_coalesced: the root keeps its values; bad arguments", "[collectives][coalesced]") {
  auto pg = testing::fake_group(0, 1, "one", nullptr);
  TensorList t{arange(5, DType::Float32), ones({2, 2}, DType::Float64)};
  broadcast_coalesced(*pg, t, 8, 0);
  REQUIRE(equal(t[0], arange(5, DType::Float32)));
  REQUIRE_THROWS_WITH(broadcast_coalesced(*pg, t, 8, 1), Contains("invalid root rank"));
  REQUIRE_THROWS_WITH(broadcast_coalesced(*pg, t, 0, 0), Contains("buffer size must be positive"));
  TensorList undefined{Tensor()};
  REQUIRE_THROWS_WITH(broadcast_coalesced(*pg, undefined, 8, 0), Contains("undefined"));
}
