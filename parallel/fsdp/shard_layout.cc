#include "parallel/fsdp/shard_layout.h"

#include <algorithm>

#include "base/check.h"
#include "base/error.h"

namespace braid::parallel::fsdp {

namespace {

Shape with_rows(const Shape& full, int64_t rows) {
  Shape s = full;
  s[0] = rows;
  return s;
}

}  // namespace

int64_t ParamShardSpec::shard_start_row(int rank) const {
  return std::min(rows, static_cast<int64_t>(rank) * rows_per_rank);
}

int64_t ParamShardSpec::shard_rows(int rank) const {
  const int64_t start = shard_start_row(rank);
  return std::min(rows, start + rows_per_rank) - start;
}

Shape ParamShardSpec::shard_shape(int rank) const { return with_rows(full_shape, shard_rows(rank)); }

ShardLayout::ShardLayout(const std::vector<std::pair<std::string, Shape>>& params, int world) : world_(world) {
  BRAID_CHECK_ARG(world >= 1, "fsdp: cannot shard over a group of {} ranks", world);
  params_.reserve(params.size());
  for (const auto& [name, shape] : params) {
    BRAID_CHECK_ARG(!shape.empty(),
                    "fsdp: parameter '{}' is 0-dimensional; FSDP shards on dim 0 and needs at least one dimension",
                    name);
    ParamShardSpec spec;
    spec.name = name;
    spec.full_shape = shape;
    spec.rows = shape[0];
    spec.row_numel = 1;
    for (size_t d = 1; d < shape.size(); ++d) spec.row_numel *= shape[d];
    spec.rows_per_rank = (spec.rows + world - 1) / world;
    spec.block_offset = block_numel_;
    spec.unsharded_offset = block_numel_ * world;
    block_numel_ += spec.padded_shard_numel();
    params_.push_back(std::move(spec));
  }
}

Tensor ShardLayout::shard_of(const Tensor& full, size_t i, int rank) const {
  const ParamShardSpec& p = param(i);
  return full.narrow(0, p.shard_start_row(rank), p.shard_rows(rank));
}

Tensor ShardLayout::padded_full_segment(const Tensor& unsharded, size_t i) const {
  const ParamShardSpec& p = param(i);
  return unsharded.narrow(0, p.unsharded_offset, p.padded_full_numel(world_));
}

Tensor ShardLayout::full_view(const Tensor& unsharded, size_t i) const {
  const ParamShardSpec& p = param(i);
  return unsharded.narrow(0, p.unsharded_offset, p.rows * p.row_numel).view(p.full_shape);
}

Tensor ShardLayout::block_segment(const Tensor& block, size_t i) const {
  const ParamShardSpec& p = param(i);
  return block.narrow(0, p.block_offset, p.padded_shard_numel()).view(with_rows(p.full_shape, p.rows_per_rank));
}

}  // namespace braid::parallel::fsdp
