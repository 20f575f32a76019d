// Helpers the FSDP parity tests share: the shard a rank should hold, a cross-rank mean, and a look at the
// gathered full parameters.
#pragma once

#include <memory>
#include <vector>

#include "collectives/process_group.h"
#include "nn/module.h"
#include "parallel/fsdp/fsdp_unit.h"
#include "parallel/fsdp/unit_registry.h"
#include "tensor/factory.h"
#include "tests/mp/fsdp/fsdp_models.h"

namespace braid::mp {

// Each rank's shard of `ref` (rows of dim 0), as the sharded model should hold it.
inline Tensor expected_shard(const Tensor& ref, int rank, int world) {
  const RowRange r = shard_rows(ref.size(0), rank, world);
  return ref.narrow(0, r.start, r.count);
}

inline double average_over_ranks(const std::shared_ptr<collectives::ProcessGroup>& group, double local) {
  Tensor t = full({1}, local, DType::Float64);
  std::vector<Tensor> list{t};
  group->allreduce(list)->wait();
  return t.item<double>() / group->size();
}

// Gathers every unit of `model` (collective), runs `check` on the full parameters, and reshards.
template <class Check>
void with_full_parameters(nn::Module& model, Check check) {
  std::vector<std::shared_ptr<parallel::fsdp::FSDPUnit>> units;
  for (auto& [path, m] : model.named_modules()) {
    if (auto u = parallel::fsdp::unit_of_module(*m)) units.push_back(u);
  }
  for (auto& u : units) u->unshard();
  check();
  for (auto& u : units) u->reshard();
}

}  // namespace braid::mp
