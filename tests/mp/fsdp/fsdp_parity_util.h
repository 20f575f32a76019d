// Helpers the FSDP parity tests share: the shard a rank should hold, a cross-rank mean, a look at the
// gathered full parameters, and the training-parity check itself (check_training_parity).
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/variable.h"
#include "nn/optim/sgd.h"
#include "tensor/compare.h"
#include "tensor/random.h"
#include "tests/mp/support/mp_test.h"

#include "collectives/core/process_group.h"
#include "collectives/registry/group_registry.h"
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

// The float32 parity tolerance the FSDP tests share.
inline constexpr double kRtol = 1e-5;
inline constexpr double kAtol = 1e-6;

struct ParityTolerance {
  double rtol = kRtol;
  double atol = kAtol;
};

// One parity run: `reference` is the unsharded model (every rank builds the same one), `sharded` the same
// model with its FSDP units applied. Parameters correspond by position; their names must be equal once
// each of `prefixes_to_ignore` is removed from the sharded model's names (common_fsdp's check_sharded_parity
// does the same for activation-checkpoint wrappers).
struct ParitySetup {
  std::shared_ptr<nn::Module> reference;
  std::shared_ptr<nn::Module> sharded;
  bool params_sharded = true;  // false for NO_SHARD: every rank holds full parameters
  std::vector<std::string> prefixes_to_ignore;
  ParityTolerance tol;
  int steps = 3;
  int64_t local_batch = 2;
  int64_t in_features = 8, out_features = 8;
};

inline std::string strip_prefixes(std::string name, const std::vector<std::string>& prefixes) {
  for (const auto& prefix : prefixes) {
    for (size_t at; (at = name.find(prefix)) != std::string::npos;) name.erase(at, prefix.size());
  }
  return name;
}

// FSDP against one process on the concatenated batch: each rank trains `sharded` on its slice of a global
// batch while `reference` trains on all of it (SGD, mse loss). After every step the mean of the ranks'
// losses equals the reference loss, each rank's parameter and gradient shards equal the reference's rows
// (check_sharded_parity), and the gathered full parameters equal the reference's after the update.
inline void check_training_parity(MpFixture& f, const ParitySetup& s) {
  const int ws = f.size(), r = f.rank();
  auto group = f.shared_group();
  nn::optim::SGD ref_opt(s.reference->parameters(), {.lr = 0.05});
  nn::optim::SGD opt(s.sharded->parameters(), {.lr = 0.05});  // shards: the optimizer never sees a full tensor
  const auto ref_params = s.reference->named_parameters();

  for (int step = 0; step < s.steps; ++step) {
    INFO("step " << step);
    Generator gen(1000 + static_cast<uint64_t>(step));
    const Tensor input = rand({ws * s.local_batch, s.in_features}, {}, &gen);
    const Tensor target = rand({ws * s.local_batch, s.out_features}, {}, &gen);
    const Tensor ref_loss = autograd::mse_loss((*s.reference)(input), target);
    autograd::backward(ref_loss);
    const Tensor mine = input.narrow(0, r * s.local_batch, s.local_batch);
    const Tensor mine_target = target.narrow(0, r * s.local_batch, s.local_batch);
    const Tensor loss = autograd::mse_loss((*s.sharded)(mine), mine_target);
    autograd::backward(loss);

    // Losses: the mean of the ranks' local losses is the loss on the whole batch.
    const double ref_value = ref_loss.item<double>();
    CHECK(std::abs(average_over_ranks(group, loss.item<double>()) - ref_value) <= s.tol.rtol * std::abs(ref_value));

    // check_sharded_parity: this rank's parameter and gradient shards are the reference's rows.
    const auto params = s.sharded->named_parameters();
    REQUIRE(ref_params.size() == params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      INFO(params[i].first);
      CHECK(strip_prefixes(params[i].first, s.prefixes_to_ignore) == ref_params[i].first);
      const Tensor& ref = ref_params[i].second;
      const Tensor& p = params[i].second;
      const Tensor want = s.params_sharded ? expected_shard(ref, r, ws) : ref;
      CHECK(p.shape() == want.shape());
      CHECK(p.dtype() == ref.dtype());
      CHECK(allclose(p, want, s.tol.rtol, s.tol.atol));
      const Tensor g = autograd::grad(p);
      // A frozen parameter (common_fsdp's NonUniformReqGradNWM) stays frozen and gets no gradient.
      CHECK(autograd::requires_grad(p) == autograd::requires_grad(ref));
      if (!autograd::requires_grad(ref)) {
        CHECK_FALSE(g.defined());
        continue;
      }
      const Tensor ref_g = autograd::grad(ref);
      if (!ref_g.defined()) {
        // A trainable parameter the forward never used (common_fsdp's DoubleLinear without its second
        // Linear): no gradient in the reference; FSDP gives none, or zeros.
        CHECK((!g.defined() || allclose(g, zeros_like(g))));
        continue;
      }
      REQUIRE(g.defined());
      CHECK(g.dtype() == ref.dtype());
      CHECK(allclose(g, s.params_sharded ? expected_shard(ref_g, r, ws) : ref_g, s.tol.rtol, s.tol.atol));
    }
    ref_opt.step();
    opt.step();
    ref_opt.zero_grad();
    opt.zero_grad();

    // The full parameters, gathered, equal the reference after the step.
    with_full_parameters(*s.sharded, [&] {
      const auto full_params = s.sharded->named_parameters();
      for (size_t i = 0; i < full_params.size(); ++i) {
        INFO(full_params[i].first);
        CHECK(full_params[i].second.shape() == ref_params[i].second.shape());
        CHECK(allclose(full_params[i].second.to(DType::Float32), ref_params[i].second, s.tol.rtol, s.tol.atol));
      }
    });
  }
}

// Shard groups of `s` consecutive ranks and replicate groups of the ranks with the same index in theirs;
// every rank creates every group in the same order and keeps its own.
struct HybridGroups {
  std::shared_ptr<ProcessGroup> shard, replicate;
  int shard_size;
};
inline HybridGroups hybrid_groups(int rank, int ws) {
  HybridGroups g;
  g.shard_size = ws % 2 == 0 ? ws / 2 : ws;
  const int replicas = ws / g.shard_size;
  for (int k = 0; k < replicas; ++k) {
    std::vector<int> ranks;
    for (int i = 0; i < g.shard_size; ++i) ranks.push_back(k * g.shard_size + i);
    auto group = collectives::new_group(ranks);
    if (rank / g.shard_size == k) g.shard = group;
  }
  for (int j = 0; j < g.shard_size; ++j) {
    std::vector<int> ranks;
    for (int k = 0; k < replicas; ++k) ranks.push_back(k * g.shard_size + j);
    auto group = collectives::new_group(ranks);
    if (rank % g.shard_size == j) g.replicate = group;
  }
  return g;
}

// A scratch directory every rank of the default group names alike (rank 0's pid, shared through an
// allreduce), made; each test removes it at its end.
inline std::filesystem::path shared_temp_dir(const std::string& tag, int rank) {
  Tensor pid = ints({rank == 0 ? static_cast<int64_t>(::getpid()) : 0});
  TensorList list{pid};
  collectives::default_group()->allreduce(list)->wait();
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("braid_{}_{}", tag, pid.item<int64_t>());
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace braid::mp
