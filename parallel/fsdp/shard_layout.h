// Sharding math of one FSDP unit, without communication: where each parameter's rows go.
//
// Every parameter is sharded on dim 0 across the group's `world` ranks. With `rows` rows, each rank owns
// `rows_per_rank = ceil(rows / world)` row slots; rank r holds rows [r * rows_per_rank, (r + 1) *
// rows_per_rank) clipped to `rows`, so the last ranks may hold fewer rows (or none) and the rest of their
// slots is zero padding. Padding keeps every rank's contribution to a collective the same size.
//
// A unit packs its parameters into one "block" per rank: the padded shards of parameters 0..n-1, one after
// the other. The reduce-scatter input is world blocks, rank-major (block r is what rank r receives), and
// the unsharded storage holds each parameter's padded full tensor (world * rows_per_rank rows) one after
// the other, so that an all-gather per parameter writes straight into it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace braid::parallel::fsdp {

struct ParamShardSpec {
  std::string name;          // dotted, relative to the unit's module
  Shape full_shape;          // the parameter as the module sees it
  int64_t rows = 0;          // full_shape[0]
  int64_t row_numel = 0;     // elements per row (product of full_shape[1:])
  int64_t rows_per_rank = 0; // ceil(rows / world): row slots per rank, padding included
  int64_t block_offset = 0;  // where this parameter's padded shard starts inside a rank's block (elements)
  int64_t unsharded_offset = 0;  // where its padded full tensor starts inside the unsharded storage

  int64_t padded_shard_numel() const { return rows_per_rank * row_numel; }
  int64_t padded_full_numel(int world) const { return padded_shard_numel() * world; }
  // First row rank `rank` holds and how many real (not padding) rows it holds.
  int64_t shard_start_row(int rank) const;
  int64_t shard_rows(int rank) const;
  // The shape of rank `rank`'s unpadded shard: [shard_rows(rank), full_shape[1:]...].
  Shape shard_shape(int rank) const;
};

class ShardLayout {
 public:
  // Throws InvalidArgument for world < 1 or a 0-dimensional parameter (nothing to shard on dim 0).
  ShardLayout(const std::vector<std::pair<std::string, Shape>>& params, int world);

  int world() const { return world_; }
  const std::vector<ParamShardSpec>& params() const { return params_; }
  const ParamShardSpec& param(size_t i) const { return params_.at(i); }
  // Elements of one rank's block (every padded shard) and of the unsharded storage (every padded full).
  int64_t block_numel() const { return block_numel_; }
  int64_t unsharded_numel() const { return block_numel_ * world_; }

  // Rank `rank`'s rows of `full` (a view, unpadded), for a tensor of the parameter's full shape.
  Tensor shard_of(const Tensor& full, size_t i, int rank) const;
  // The full parameter i inside `unsharded` (a flat tensor of unsharded_numel() elements): a view of the
  // real rows of its padded segment.
  Tensor full_view(const Tensor& unsharded, size_t i) const;
  // Parameter i's padded segment of `unsharded` (flat, padded_full_numel elements): an all-gather output.
  Tensor padded_full_segment(const Tensor& unsharded, size_t i) const;
  // Parameter i's padded shard inside a flat block (block_numel() elements), shaped [rows_per_rank, ...].
  Tensor block_segment(const Tensor& block, size_t i) const;

 private:
  int world_;
  std::vector<ParamShardSpec> params_;
  int64_t block_numel_ = 0;
};

}  // namespace braid::parallel::fsdp
