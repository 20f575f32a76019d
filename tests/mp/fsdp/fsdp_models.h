// The FSDP test models of torch's common_fsdp.py built in braid, and the helpers the FSDP parity tests share.
// NestedWrappedModule and TransformerWithSharedParams are the runtime's (runtime/models/fsdp_models.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/nn_ops.h"
#include "nn/container.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "runtime/models/fsdp_models.h"
#include "tensor/factory.h"
#include "tensor/random.h"

namespace braid::mp {

// NestedWrappedModule lives in the runtime (model kind "fsdp_nested"), which builds it for job files.
using runtime::NestedWrappedModule;

// An MLP stack: Linear(8, 16), ReLU, Linear(16, 10), ReLU, Linear(10, 8) — 10 and 8 rows do not divide
// by 4 (or 3) ranks, so shards are padded.
inline std::shared_ptr<nn::MLP> make_mlp(uint64_t seed) {
  Generator gen(seed);
  return std::make_shared<nn::MLP>(std::vector<int64_t>{8, 16, 10, 8}, true, &gen);
}

// Rows [start, start + count) of dim 0 that rank `rank` of `world` holds (the sharding rule, restated
// independently of parallel/fsdp/shard_layout.h).
struct RowRange {
  int64_t start;
  int64_t count;
};
inline RowRange shard_rows(int64_t rows, int rank, int world) {
  const int64_t per = (rows + world - 1) / world;
  const int64_t start = std::min(rows, per * rank);
  return {start, std::min(rows, start + per) - start};
}

// An MLP with a 3-wide hidden layer: Linear(16, 3) has fewer rows than 4 ranks, so the last rank's shard of
// its weight and bias is empty ([0, 16] and [0]) and must still take part in every collective and step.
inline std::shared_ptr<nn::MLP> make_narrow_mlp(uint64_t seed) {
  Generator gen(seed);
  return std::make_shared<nn::MLP>(std::vector<int64_t>{8, 16, 3, 8}, true, &gen);
}

}  // namespace braid::mp
