// What one FSDP unit does around forward and backward: how many collectives each strategy issues, when the
// parameters are full or sharded, and the errors fully_shard raises (null group, mixed dtypes, a unit
// applied twice, tied parameters across units, ranks that shard different models).
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/op_helpers.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "nn/linear.h"
#include "parallel/fsdp/fully_shard.h"
#include "parallel/fsdp/unit_registry.h"
#include "tensor/compare.h"
#include "tests/mp/fsdp/fsdp_models.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
namespace fsdp = braid::parallel::fsdp;

namespace {

// A module that registers a tensor it is given: two of them sharing one tensor are tied weights.
class Holder : public nn::Module {
 public:
  explicit Holder(const Tensor& t) : nn::Module("Holder") { w = register_parameter("w", t); }
  Tensor forward(const Tensor& x) override { return autograd::mul(w, x); }
  Tensor w;
};

// out = w + x, whose backward hands the very same gradient tensor to w and to x (as a rule may).
class AddsParameter : public nn::Module {
 public:
  explicit AddsParameter(const Tensor& t) : nn::Module("AddsParameter") { w = register_parameter("w", t); }
  Tensor forward(const Tensor& x) override {
    return autograd::detail::record("SharedGradAdd", {w, x}, braid::add(w, x), {},
                                    [](const TensorList& g, autograd::SavedTensors&) { return TensorList{g[0], g[0]}; });
  }
  Tensor w;
};

class MixedDtypes : public nn::Module {
 public:
  MixedDtypes() : nn::Module("MixedDtypes") {
    register_parameter("a", ones({2}));
    register_parameter("b", ones({2}, DType::Float64));
  }
};

}  // namespace

TEST_CASE_METHOD(MpFixture, "fsdp: collectives per step and parameter states of each strategy", "[fsdp]") {
  auto group = shared_group();
  using S = fsdp::ShardingStrategy;
  struct Case {
    S strategy;
    bool input_grad;  // whether the input needs a gradient: only then does backward read the weight
    uint64_t forward_ops, backward_ops;  // weight and bias: one all-gather each; one reduce-scatter
    bool full_between;                   // parameters full between forward and backward
  };
  for (const Case& c : {Case{S::FULL_SHARD, true, 2, 3, false}, Case{S::FULL_SHARD, false, 2, 1, false},
                        Case{S::SHARD_GRAD_OP, true, 2, 1, true}, Case{S::SHARD_GRAD_OP, false, 2, 1, true},
                        Case{S::NO_SHARD, true, 0, 1, true}}) {
    INFO(fsdp::to_string(c.strategy) << (c.input_grad ? ", input requires grad" : ", plain input"));
    Generator gen(1);
    auto linear = std::make_shared<nn::Linear>(8, 6, true, &gen);
    fsdp::FSDPOptions o;
    o.strategy = c.strategy;
    auto unit = fsdp::fully_shard(*linear, group, o);
    const bool sharded = c.strategy != S::NO_SHARD;
    const RowRange rows = shard_rows(6, rank(), size());
    CHECK(linear->weight().shape() == (sharded ? Shape{rows.count, 8} : Shape{6, 8}));

    const uint64_t before = group->sequence_number();
    Tensor x = ones({2, 8});
    if (c.input_grad) autograd::set_requires_grad(x);
    const Tensor out = (*linear)(x);
    CHECK(group->sequence_number() - before == c.forward_ops);
    CHECK(linear->weight().shape() == (c.full_between ? Shape{6, 8} : Shape{rows.count, 8}));
    CHECK(autograd::is_leaf(linear->weight()));  // the node is attached only while forward runs

    autograd::backward(autograd::sum(out));
    CHECK(group->sequence_number() - before == c.forward_ops + c.backward_ops);
    CHECK(linear->weight().shape() == (sharded ? Shape{rows.count, 8} : Shape{6, 8}));
    CHECK(autograd::grad(linear->weight()).shape() == linear->weight().shape());
    CHECK_FALSE(unit->is_unsharded());
    if (c.input_grad) CHECK(autograd::grad(x).shape() == Shape{2, 8});

    // Without grad nothing waits for a backward: the unit reshards right after forward.
    autograd::NoGradGuard no_grad;
    (*linear)(ones({2, 8}));
    CHECK(linear->weight().shape() == (sharded ? Shape{rows.count, 8} : Shape{6, 8}));
  }
}

TEST_CASE_METHOD(MpFixture, "fsdp: backward gives the gathered parameters back before the full gradients exist",
                 "[fsdp]") {
  using S = fsdp::ShardingStrategy;
  for (const S strategy : {S::FULL_SHARD, S::SHARD_GRAD_OP}) {
    for (const bool retain : {false, true}) {
      INFO(fsdp::to_string(strategy) << (retain ? ", retain_graph" : ""));
      Generator gen(4);
      auto linear = std::make_shared<nn::Linear>(8, 6, true, &gen);
      fsdp::FSDPOptions o;
      o.strategy = strategy;
      auto unit = fsdp::fully_shard(*linear, shared_group(), o);
      // The reduction node is the parameters' grad_fn while forward runs; its pre-hook sees the moment
      // the full gradients arrive.
      std::vector<bool> gathered_at_reduction;
      linear->add_forward_pre_hook([&](nn::Module&, TensorList&) {
        autograd::grad_fn(linear->weight())->add_pre_hook(0, [&](const Tensor&) {
          gathered_at_reduction.push_back(unit->is_unsharded());
          return Tensor();
        });
      });
      Tensor x = ones({2, 8});
      autograd::set_requires_grad(x);
      const Tensor out = (*linear)(x);
      autograd::backward(autograd::sum(out), Tensor(), retain);
      // LinearBackward drops the weight once x's gradient is computed; the unit then reshards, before the
      // weight's gradient is allocated. retain_graph keeps the saved weight, and so the gathered memory.
      CHECK(gathered_at_reduction == std::vector<bool>{retain});
      CHECK_FALSE(unit->is_unsharded());
      if (retain) {
        // The kept graph still works: backward gathers again for it.
        const Tensor first = autograd::grad(linear->weight()).clone();
        autograd::backward(autograd::sum(out));
        CHECK(allclose(autograd::grad(linear->weight()), first.add(first)));
      }
    }
  }
}

TEST_CASE_METHOD(MpFixture, "fsdp: fully_shard errors name the unit and the problem", "[fsdp]") {
  auto group = shared_group();
  SECTION("null group") {
    nn::Linear l(2, 2);
    CHECK_THROWS_WITH(fsdp::fully_shard(l, nullptr), Catch::Contains("fully_shard(Linear): the process group is null"));
  }
  SECTION("mixed dtypes in one unit") {
    MixedDtypes m;
    CHECK_THROWS_WITH(fsdp::fully_shard(m, group), Catch::Contains("must share a dtype and a device, but 'a' is "
                                                                   "float32[2] cpu and 'b' is float64[2] cpu"));
  }
  SECTION("a module sharded twice") {
    nn::Linear l(4, 4);
    fsdp::fully_shard(l, group);
    CHECK_THROWS_WITH(fsdp::fully_shard(l, group), Catch::Contains("is already an FSDP unit"));
  }
  SECTION("tied parameters in two units") {
    const Tensor shared = ones({4, 2});
    Holder a(shared), b(shared);
    fsdp::fully_shard(a, group, {}, "a");
    CHECK_THROWS_WITH(fsdp::fully_shard(b, group, {}, "b"),
                      Catch::Contains("parameter 'w' of unit 'b' is already managed by unit 'a'"));
  }
  SECTION("offload_params without sharding") {
    nn::Linear l(2, 2);
    fsdp::FSDPOptions o;
    o.strategy = fsdp::ShardingStrategy::NO_SHARD;
    o.offload_params = true;
    CHECK_THROWS_WITH(fsdp::fully_shard(l, group, o),
                      Catch::Contains("fully_shard(Linear): offload_params needs a sharded strategy"));
  }
  SECTION("ranks shard different models") {
    nn::Linear l(8, rank() == 1 ? 5 : 4);
    CHECK_THROWS_WITH(fsdp::fully_shard(l, group), Catch::Contains("rank 1 of group") &&
                                                       Catch::Contains("has a different unit than rank 0"));
  }
}

TEST_CASE_METHOD(MpFixture, "fsdp: mixed precision gathers in param_dtype and keeps shards and gradients in theirs",
                 "[fsdp]") {
  Generator gen(2);
  auto linear = std::make_shared<nn::Linear>(8, 6, true, &gen);
  fsdp::FSDPOptions o;
  o.strategy = fsdp::ShardingStrategy::SHARD_GRAD_OP;  // full parameters stay visible until backward
  o.mixed_precision.param_dtype = DType::Float64;
  o.mixed_precision.output_dtype = DType::Float32;
  fsdp::fully_shard(*linear, shared_group(), o);
  CHECK(linear->weight().dtype() == DType::Float32);
  const Tensor out = (*linear)(ones({2, 8}));  // a float32 input, cast to float64 by the unit
  CHECK(linear->weight().dtype() == DType::Float64);
  CHECK(out.dtype() == DType::Float32);
  autograd::backward(autograd::sum(out));
  CHECK(linear->weight().dtype() == DType::Float32);
  CHECK(autograd::grad(linear->weight()).dtype() == DType::Float32);

  nn::Linear plain(2, 2);
  fsdp::FSDPOptions bad;
  bad.strategy = fsdp::ShardingStrategy::NO_SHARD;
  bad.mixed_precision.param_dtype = DType::BFloat16;
  CHECK_THROWS_WITH(fsdp::fully_shard(plain, shared_group(), bad), Catch::Contains("needs a sharded strategy"));
}

TEST_CASE_METHOD(MpFixture, "fsdp: forward_prefetch issues the next unit's all-gather during this unit's forward",
                 "[fsdp]") {
  auto model = make_mlp(6);  // Linear "0", ReLU, Linear "2", ReLU, Linear "4"
  fsdp::FSDPOptions o;
  o.forward_prefetch = true;
  fsdp::apply_fully_shard(*model, shared_group(), o, fsdp::module_type_policy({"Linear"}));
  auto second = fsdp::unit_of_module(*model->child("2"));
  REQUIRE(second != nullptr);
  std::vector<bool> pending_during_first;
  model->child("0")->add_forward_hook(
      [&](nn::Module&, const TensorList&, TensorList&) {
        pending_during_first.push_back(second->is_unshard_pending());
      });
  const uint64_t before = shared_group()->sequence_number();
  for (int step = 0; step < 3; ++step) autograd::backward(autograd::sum((*model)(ones({2, 8}))));
  // Same collectives as without prefetch: 2 all-gathers per unit and step in forward, 2 in backward and 1
  // reduce-scatter; the first unit gathers nothing for backward (its input needs no gradient, so its
  // weight is not saved).
  CHECK(shared_group()->sequence_number() - before == 3u * (3u * 5u - 2u));
  // The first step records the order; later steps prefetch.
  CHECK(pending_during_first == std::vector<bool>{false, true, true});
}

TEST_CASE_METHOD(MpFixture, "fsdp: backward_prefetch issues the previous unit's all-gather in this unit's pre-backward",
                 "[fsdp]") {
  auto model = make_mlp(7);  // Linear "0", ReLU, Linear "2", ReLU, Linear "4"
  fsdp::FSDPOptions o;
  o.backward_prefetch = true;
  fsdp::apply_fully_shard(*model, shared_group(), o, fsdp::module_type_policy({"Linear"}));
  auto first = fsdp::unit_of_module(*model->child("0"));
  // A gradient hook on "2"'s output, registered after FSDP's own (its forward hook ran first), sees the
  // moment right after "2"'s pre-backward: "0"'s all-gather should be in flight then.
  std::vector<bool> first_pending;
  model->child("2")->add_forward_hook([&](nn::Module&, const TensorList&, TensorList& outputs) {
    autograd::register_hook(outputs.at(0), [&](const Tensor&) {
      first_pending.push_back(first->is_unshard_pending());
      return Tensor();
    });
  });
  // An input that needs a gradient: the first unit's backward reads its weight, so it is gathered.
  Tensor x = ones({2, 8});
  autograd::set_requires_grad(x);
  const uint64_t before = shared_group()->sequence_number();
  for (int step = 0; step < 3; ++step) autograd::backward(autograd::sum((*model)(x)));
  CHECK(shared_group()->sequence_number() - before == 3u * 3u * 5u);  // as without prefetch
  // The order is recorded during the first forward, so even the first backward prefetches.
  CHECK(first_pending == std::vector<bool>{true, true, true});
  CHECK_FALSE(first->is_unsharded());
  CHECK_FALSE(first->is_unshard_pending());
  // A plain input: nothing of the first unit is saved, so nothing is prefetched for it.
  autograd::backward(autograd::sum((*model)(ones({2, 8}))));
  CHECK(shared_group()->sequence_number() - before == 3u * 3u * 5u + 3u * 5u - 2u);
  CHECK(first_pending == std::vector<bool>{true, true, true, false});
}

TEST_CASE_METHOD(MpFixture, "fsdp: a full gradient shared with another input is reduced without touching it",
                 "[fsdp]") {
  // out = w + x hands the same gradient tensor to w's reduction node and to x. p is 9 MiB: large enough
  // to be reduce-scattered straight from its gradient (and, on mpi, through an allreduce in place).
  const int64_t side = 1536;
  Generator gen(5);
  const Tensor full = rand({side, side}, {}, &gen);
  AddsParameter module(full.clone());
  fsdp::fully_shard(module, shared_group());
  Tensor x0 = rand({side, side}, {}, &gen);
  autograd::set_requires_grad(x0);
  // x's node is older than the unit's reduction node, so the engine runs it after the reduction: it
  // reads the shared gradient only once the reduction is done with it.
  const Tensor x = autograd::mul(x0, Scalar(1.5));
  const Tensor out = module(x);
  autograd::backward(autograd::sum(autograd::mul(out, out)));
  // d loss / d x0 = 1.5 * 2 (w + x), whatever the reduction did with the shared tensor.
  CHECK(allclose(autograd::grad(x0), braid::mul(braid::add(full, braid::mul(x0, Scalar(1.5))), Scalar(3.0)), 1e-5,
                 1e-5));
}
