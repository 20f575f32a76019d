// FSDP's sharding math (parallel/fsdp/shard_layout.h): rows per rank, padding, offsets and views, without
// any communication.
#include <catch2/catch.hpp>

#include "parallel/fsdp/shard_layout.h"
#include "tensor/compare.h"
#include "tensor/factory.h"

namespace braid::parallel::fsdp {
namespace {

Tensor iota(const Shape& shape) {
  Tensor t = empty(shape);
  float* d = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = static_cast<float>(i);
  return t;
}

TEST_CASE("fsdp shard layout: rows are split evenly, the last ranks padded", "[fsdp]") {
  // 10 rows over 4 ranks: 3 slots each; ranks hold 3, 3, 3, 1 rows. 2 rows over 4 ranks: 1, 1, 0, 0.
  ShardLayout layout({{"w", {10, 5}}, {"b", {2}}}, 4);
  const ParamShardSpec& w = layout.param(0);
  CHECK(w.rows_per_rank == 3);
  CHECK(w.row_numel == 5);
  CHECK(w.shard_rows(0) == 3);
  CHECK(w.shard_rows(3) == 1);
  CHECK(w.shard_start_row(3) == 9);
  CHECK(w.shard_shape(3) == Shape{1, 5});
  const ParamShardSpec& b = layout.param(1);
  CHECK(b.rows_per_rank == 1);
  CHECK(b.shard_rows(1) == 1);
  CHECK(b.shard_rows(2) == 0);
  CHECK(b.shard_start_row(3) == 2);
  CHECK(b.shard_shape(2) == Shape{0});
  // Block: w's 15 padded elements, then b's 1.
  CHECK(w.block_offset == 0);
  CHECK(b.block_offset == 15);
  CHECK(layout.block_numel() == 16);
  CHECK(layout.unsharded_numel() == 64);
  CHECK(b.unsharded_offset == 60);
}

TEST_CASE("fsdp shard layout: shards and full views address the right elements", "[fsdp]") {
  ShardLayout layout({{"w", {5, 2}}, {"v", {3}}}, 2);
  const Tensor w = iota({5, 2});
  CHECK(equal(layout.shard_of(w, 0, 0), w.narrow(0, 0, 3)));
  CHECK(equal(layout.shard_of(w, 0, 1), w.narrow(0, 3, 2)));

  // An unsharded storage as the per-parameter all-gathers leave it: rank 0's padded shard, then rank 1's.
  Tensor unsharded = zeros({layout.unsharded_numel()});
  for (int r = 0; r < 2; ++r) {
    Tensor seg = layout.padded_full_segment(unsharded, 0).view({6, 2});
    seg.narrow(0, r * 3, layout.param(0).shard_rows(r)).copy_(layout.shard_of(w, 0, r));
  }
  CHECK(equal(layout.full_view(unsharded, 0), w));
  CHECK(layout.full_view(unsharded, 1).shape() == Shape{3});
  CHECK(layout.full_view(unsharded, 1).storage_offset() == 12);

  Tensor block = zeros({layout.block_numel()});
  CHECK(layout.block_segment(block, 0).shape() == Shape{3, 2});
  CHECK(layout.block_segment(block, 1).shape() == Shape{2});
  CHECK(layout.block_segment(block, 1).storage_offset() == 6);
}

TEST_CASE("fsdp shard layout: one rank holds everything, bad input is named", "[fsdp]") {
  ShardLayout one({{"w", {3, 4}}}, 1);
  CHECK(one.param(0).shard_rows(0) == 3);
  CHECK(one.block_numel() == 12);
  CHECK_THROWS_WITH(ShardLayout({{"scale", {}}}, 2), Catch::Contains("'scale' is 0-dimensional"));
  CHECK_THROWS_WITH(ShardLayout({{"w", {2}}}, 0), Catch::Contains("group of 0 ranks"));
}

}  // namespace
}  // namespace braid::parallel::fsdp
