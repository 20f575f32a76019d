// Full parameters outside a step (SummonFullParams, with and without writeback), full and sharded state
// dicts saved on N ranks and loaded on M, and HYBRID_SHARD over two groups (shards within a group of ws/2 ranks,
// replicas across) trained against the single-process reference.
#include <unistd.h>

#include <filesystem>

#include "autograd/engine.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/variable.h"
#include "collectives/registry/group_registry.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "nn/serialize.h"
#include "parallel/fsdp/full_params.h"
#include "parallel/fsdp/fully_shard.h"
#include "parallel/fsdp/optim_state.h"
#include "parallel/fsdp/sharded_state_dict.h"
#include "tensor/compare.h"
#include "tests/mp/fsdp/fsdp_models.h"
#include "tests/mp/fsdp/fsdp_parity_util.h"
#include "tests/mp/support/default_group.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
namespace fsdp = braid::parallel::fsdp;
namespace coll = braid::collectives;

TEST_CASE_METHOD(MpFixture, "fsdp: SummonFullParams shows full parameters and writes edits back", "[fsdp]") {
  const int ws = size(), r = rank();
  auto reference = make_mlp(11);
  auto sharded = make_mlp(11);
  fsdp::apply_fully_shard(*sharded, shared_group(), {}, fsdp::module_type_policy({"Linear"}));
  const auto ref_params = reference->parameters();
  {
    fsdp::SummonFullParams full(*sharded);
    const auto params = sharded->parameters();
    for (size_t i = 0; i < params.size(); ++i) CHECK(equal(params[i], ref_params[i]));
    params[0].fill_(0.5);  // kept: writeback
  }
  {
    fsdp::SummonFullParams full(*sharded, /*writeback=*/false);
    sharded->parameters()[1].fill_(-3.0);  // dropped
  }
  const auto params = sharded->parameters();
  CHECK(equal(params[0], full(expected_shard(ref_params[0], r, ws).shape(), 0.5)));
  CHECK(equal(params[1], expected_shard(ref_params[1], r, ws)));
  CHECK(params[2].shape() == expected_shard(ref_params[2], r, ws).shape());
}

TEST_CASE_METHOD(MpFixture, "fsdp: full state dicts are the unsharded model's and load on another world size",
                 "[fsdp]") {
  DefaultGroupScope world(*this);
  const int ws = size(), r = rank();
  auto reference = make_mlp(21);
  auto sharded = make_mlp(21);
  fsdp::apply_fully_shard(*sharded, coll::default_group(), {}, fsdp::size_based_policy(100));

  const nn::StateDict on_rank0 = fsdp::full_state_dict(*sharded);
  const nn::StateDict want = reference->state_dict();
  if (r == 0) {
    REQUIRE(on_rank0.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      CHECK(on_rank0[i].first == want[i].first);
      CHECK(equal(on_rank0[i].second, want[i].second));
    }
  } else {
    CHECK(on_rank0.empty());
  }

  // Saved on N = ws ranks, loaded into a model sharded over M = ws / 2 of them (one rank when ws = 2).
  const nn::StateDict everywhere = fsdp::full_state_dict(*sharded, /*rank0_only=*/false);
  const HybridGroups g = hybrid_groups(r, ws);
  auto other = make_mlp(99);  // different initial values
  fsdp::fully_shard(*other, g.shard);
  fsdp::load_full_state_dict(*other, everywhere);
  const auto ref_params = reference->parameters();
  const auto params = other->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    CHECK(equal(params[i], expected_shard(ref_params[i], g.shard->rank(), g.shard_size)));
  }
}

TEST_CASE_METHOD(MpFixture, "fsdp: HYBRID_SHARD trains like one process on the whole batch", "[fsdp]") {
  DefaultGroupScope world(*this);
  const int ws = size(), r = rank();
  const HybridGroups g = hybrid_groups(r, ws);
  fsdp::FSDPOptions o;
  o.strategy = fsdp::ShardingStrategy::HYBRID_SHARD;
  o.replicate_group = g.replicate;
  auto reference = std::make_shared<NestedWrappedModule>(5);
  auto sharded = std::make_shared<NestedWrappedModule>(5);
  for (nn::Module* target : sharded->wrap_targets()) fsdp::fully_shard(*target, g.shard, o);
  fsdp::fully_shard(*sharded, g.shard, o);
  nn::optim::SGD ref_opt(reference->parameters(), {.lr = 0.05});
  nn::optim::SGD opt(sharded->parameters(), {.lr = 0.05});
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    Generator gen(500 + static_cast<uint64_t>(step));
    const Tensor input = rand({ws * 2, 8}, {}, &gen);
    const Tensor target = rand({ws * 2, 8}, {}, &gen);
    autograd::backward(autograd::mse_loss((*reference)(input), target));
    autograd::backward(autograd::mse_loss((*sharded)(input.narrow(0, 2 * r, 2)), target.narrow(0, 2 * r, 2)));
    const auto ref_params = reference->named_parameters();
    const auto params = sharded->named_parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      INFO(params[i].first);
      const Tensor grad = autograd::grad(params[i].second);
      REQUIRE(grad.defined());
      CHECK(allclose(grad, expected_shard(autograd::grad(ref_params[i].second), g.shard->rank(), g.shard_size), kRtol, kAtol));
    }
    ref_opt.step();
    opt.step();
    ref_opt.zero_grad();
    opt.zero_grad();
    for (size_t i = 0; i < params.size(); ++i) {
      CHECK(allclose(params[i].second, expected_shard(ref_params[i].second, g.shard->rank(), g.shard_size), kRtol, kAtol));
    }
  }
}

TEST_CASE_METHOD(MpFixture, "fsdp: fully_shard on a group this rank is not in names the group", "[fsdp]") {
  DefaultGroupScope world(*this);
  auto only_rank0 = coll::new_group({0});
  nn::Linear l(4, 4);
  if (rank() == 0) {
    fsdp::fully_shard(l, only_rank0);  // a one-rank group: nothing to shard with, but valid
    CHECK(l.weight().shape() == Shape{4, 4});
  } else {
    CHECK_THROWS_WITH(fsdp::fully_shard(l, only_rank0),
                      Catch::Contains("fully_shard(Linear): checking the unit across group") &&
                          Catch::Contains("does not belong to group"));
  }
}

TEST_CASE_METHOD(MpFixture, "fsdp: sync_module_states starts every rank from rank 0's values", "[fsdp]") {
  auto rank0_model = std::make_shared<NestedWrappedModule>(0);
  auto model = std::make_shared<NestedWrappedModule>(static_cast<uint64_t>(rank()));  // differs per rank
  fsdp::FSDPOptions o;
  o.sync_module_states = true;
  for (nn::Module* target : model->wrap_targets()) fsdp::fully_shard(*target, shared_group(), o);
  fsdp::fully_shard(*model, shared_group(), o);
  const auto want = rank0_model->parameters();
  const auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) CHECK(equal(params[i], expected_shard(want[i], rank(), size())));
}

TEST_CASE_METHOD(MpFixture, "fsdp: sharded state dicts saved on N ranks load on M ranks and into a plain model",
                 "[fsdp]") {
  DefaultGroupScope world(*this);
  const int ws = size(), r = rank();
  auto reference = make_narrow_mlp(31);
  auto sharded = make_narrow_mlp(31);
  fsdp::apply_fully_shard(*sharded, coll::default_group(), {}, fsdp::module_type_policy({"Linear"}));

  const auto dir = shared_temp_dir("fsdp_ckpt", r);
  auto file = [&](int k) { return (dir / fmt::format("rank{}.brsd", k)).string(); };
  nn::save_state_dict(sharded->state_dict(), file(r));  // this rank's shards
  coll::default_group()->barrier()->wait();
  std::vector<nn::StateDict> all;
  for (int k = 0; k < ws; ++k) all.push_back(nn::load_state_dict_file(file(k)));
  coll::default_group()->barrier()->wait();
  if (r == 0) std::filesystem::remove_all(dir);

  // M = 1: a plain model, no FSDP.
  auto plain = make_narrow_mlp(77);
  fsdp::load_sharded_state_dicts(*plain, all);
  const auto want = reference->parameters();
  const auto got = plain->parameters();
  for (size_t i = 0; i < got.size(); ++i) CHECK(equal(got[i], want[i]));

  // M = ws / 2 (one rank when ws = 2).
  const HybridGroups g = hybrid_groups(r, ws);
  auto half = make_narrow_mlp(78);
  fsdp::apply_fully_shard(*half, g.shard, {}, fsdp::module_type_policy({"Linear"}));
  fsdp::load_sharded_state_dicts(*half, all);
  const auto params = half->parameters();
  for (size_t i = 0; i < params.size(); ++i) CHECK(equal(params[i], expected_shard(want[i], g.shard->rank(), g.shard_size)));

  // A dict that is neither shards nor copies is named.
  std::vector<nn::StateDict> broken = all;
  broken.push_back(all.front());
  if (ws > 1) {
    CHECK_THROWS_WITH(fsdp::load_sharded_state_dicts(*plain, broken),
                      Catch::Contains("neither shards of it nor copies"));
  }
}

TEST_CASE_METHOD(MpFixture, "fsdp: full optimizer state dicts equal the unsharded optimizer's and load on M ranks",
                 "[fsdp]") {
  DefaultGroupScope world(*this);
  const int ws = size(), r = rank();
  auto reference = make_narrow_mlp(41);
  auto sharded = make_narrow_mlp(41);
  fsdp::apply_fully_shard(*sharded, coll::default_group(), {}, fsdp::module_type_policy({"Linear"}));
  nn::optim::Adam ref_opt(reference->parameters(), nn::optim::AdamOptions{.lr = 0.01});
  nn::optim::Adam opt(sharded->parameters(), nn::optim::AdamOptions{.lr = 0.01});
  for (int step = 0; step < 2; ++step) {
    Generator gen(900 + static_cast<uint64_t>(step));
    const Tensor input = rand({ws * 2, 8}, {}, &gen);
    const Tensor target = rand({ws * 2, 8}, {}, &gen);
    autograd::backward(autograd::mse_loss((*reference)(input), target));
    autograd::backward(autograd::mse_loss((*sharded)(input.narrow(0, 2 * r, 2)), target.narrow(0, 2 * r, 2)));
    ref_opt.step();
    opt.step();
    ref_opt.zero_grad();
    opt.zero_grad();
  }
  const auto want = ref_opt.state_dict();
  const auto everywhere = fsdp::full_optim_state_dict(opt, /*rank0_only=*/false);
  const auto on_rank0 = fsdp::full_optim_state_dict(opt);
  CHECK(on_rank0.state.size() == (r == 0 ? want.state.size() : 0));
  REQUIRE(everywhere.state.size() == want.state.size());
  for (const auto& [index, state] : want.state) {
    for (const auto& [name, t] : state) {
      INFO("parameter " << index << " " << name);
      const Tensor& got = everywhere.state.at(index).at(name);
      CHECK(got.shape() == t.shape());
      CHECK(allclose(got, t, kRtol, 1e-9));
    }
  }

  // Loaded on M = ws / 2 ranks: one more step there matches one more step of the reference.
  const HybridGroups g = hybrid_groups(r, ws);
  auto half = make_narrow_mlp(41);
  fsdp::apply_fully_shard(*half, g.shard, {}, fsdp::module_type_policy({"Linear"}));
  fsdp::load_sharded_state_dicts(*half, {reference->state_dict()});  // the reference's parameters, cut
  nn::optim::Adam half_opt(half->parameters(), nn::optim::AdamOptions{.lr = 0.01});
  fsdp::load_full_optim_state_dict(half_opt, everywhere);
  Generator gen(999);
  const Tensor input = rand({ws * 2, 8}, {}, &gen);
  const Tensor target = rand({ws * 2, 8}, {}, &gen);
  autograd::backward(autograd::mse_loss((*reference)(input), target));
  // The half group's ranks split the whole batch among themselves.
  const int64_t per = ws * 2 / g.shard_size;
  const int me = g.shard->rank();
  autograd::backward(autograd::mse_loss((*half)(input.narrow(0, per * me, per)), target.narrow(0, per * me, per)));
  ref_opt.step();
  half_opt.step();
  const auto ref_params = reference->parameters();
  const auto params = half->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    CHECK(allclose(params[i], expected_shard(ref_params[i], me, g.shard_size), kRtol, kAtol));
  }
}
