// Activation checkpointing with FSDP units (nn::CheckpointWrapper): training equals one process on the
// whole batch whichever side of the wrapper the unit sits on; the recomputed forward in backward sees the
// gathered full parameters (the unit's pre-backward hook runs before the checkpoint node) and costs no
// extra all-gather; dropout under checkpointing equals dropout without it.
#include <memory>
#include <string>
#include <vector>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "nn/activation.h"
#include "nn/checkpoint_wrapper.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "parallel/fsdp/fully_shard.h"
#include "parallel/fsdp/unit_registry.h"
#include "tests/mp/fsdp/fsdp_models.h"
#include "tests/mp/fsdp/fsdp_parity_util.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
namespace fsdp = braid::parallel::fsdp;

namespace {

using ModulePtr = std::shared_ptr<nn::Module>;
using S = fsdp::ShardingStrategy;

const std::string kWrapperPrefix = std::string(nn::CheckpointWrapper::kChildName) + ".";

ModulePtr seq(std::initializer_list<ModulePtr> children) { return std::make_shared<nn::Sequential>(children); }

// Where the checkpoint wrappers go relative to the FSDP units.
enum class Layout {
  UnitIsWrapper,     // fully_shard(CheckpointWrapper(block)): as common_fsdp's checkpoint(module), then
                     // fully_shard(module)
  UnitInsideRegion,  // CheckpointWrapper(fully_shard(block)): the recomputation runs the unit's hooks again
  TwoUnitsInRegion,  // CheckpointWrapper(Sequential(unit Linear, ReLU, unit Linear, ReLU)), as above, twice
};

// Linear(8, 16), ReLU, Linear(16, 10), ReLU, Linear(10, 8) — the blocks of the first four checkpointed;
// 10 and 8 rows pad on 4 ranks. The same seed gives the same values with or without wrappers.
ModulePtr build(Layout layout, bool checkpointed, double dropout = 0.0) {
  Generator gen(42);
  auto l0 = std::make_shared<nn::Linear>(8, 16, true, &gen);
  auto l1 = std::make_shared<nn::Linear>(16, 10, true, &gen);
  auto l2 = std::make_shared<nn::Linear>(10, 8, true, &gen);
  auto wrap = [checkpointed](ModulePtr m) -> ModulePtr {
    return checkpointed ? std::make_shared<nn::CheckpointWrapper>(std::move(m)) : m;
  };
  auto act = [dropout]() -> ModulePtr {
    if (dropout > 0) return seq({std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(dropout)});
    return std::make_shared<nn::ReLU>();
  };
  if (layout == Layout::TwoUnitsInRegion) return seq({wrap(seq({l0, act(), l1, act()})), l2});
  return seq({wrap(seq({l0, act()})), wrap(seq({l1, act()})), l2});
}

// The units: the wrappers, or the blocks inside them, or the Linears inside the region; then the root.
void shard(Layout layout, nn::Module& model, const std::shared_ptr<ProcessGroup>& group,
           const fsdp::FSDPOptions& o) {
  auto& root = static_cast<nn::Sequential&>(model);
  if (layout == Layout::TwoUnitsInRegion) {
    fsdp::apply_fully_shard(model, group, o, fsdp::module_type_policy({"Linear"}));
    return;
  }
  for (int i = 0; i < 2; ++i) {
    auto block = root[i];
    auto* wrapper = dynamic_cast<nn::CheckpointWrapper*>(block.get());
    if (layout == Layout::UnitInsideRegion && wrapper != nullptr) block = wrapper->wrapped();
    fsdp::fully_shard(*block, group, o);
  }
  fsdp::fully_shard(model, group, o);
}

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::UnitIsWrapper: return "unit is the wrapper";
    case Layout::UnitInsideRegion: return "unit inside the wrapper";
    case Layout::TwoUnitsInRegion: return "two units inside one wrapper";
  }
  return "?";
}

fsdp::FSDPOptions strategy(S s, std::optional<bool> reshard = std::nullopt) {
  fsdp::FSDPOptions o;
  o.strategy = s;
  o.reshard_after_forward = reshard;
  return o;
}

// A Linear that records the shape of the weight it computes with, and whether that was a recomputation.
class ProbeLinear : public nn::Linear {
 public:
  explicit ProbeLinear(Generator& gen) : nn::Linear(8, 6, true, &gen) {}
  Tensor forward(const Tensor& x) override {
    seen.push_back({weight().shape(), autograd::in_checkpoint_recompute()});
    return nn::Linear::forward(x);
  }
  std::vector<std::pair<Shape, bool>> seen;
};

}  // namespace

TEST_CASE_METHOD(MpFixture, "fsdp checkpoint: training equals one process on the whole batch", "[fsdp]") {
  const std::vector<std::pair<std::string, fsdp::FSDPOptions>> configs = [] {
    fsdp::FSDPOptions prefetch = strategy(S::FULL_SHARD);
    prefetch.forward_prefetch = true;
    prefetch.backward_prefetch = true;
    return std::vector<std::pair<std::string, fsdp::FSDPOptions>>{
        {"FULL_SHARD", strategy(S::FULL_SHARD)},
        {"SHARD_GRAD_OP", strategy(S::SHARD_GRAD_OP)},
        {"FULL_SHARD, reshard_after_forward=false", strategy(S::FULL_SHARD, false)},
        {"NO_SHARD", strategy(S::NO_SHARD)},
        {"FULL_SHARD, forward and backward prefetch", prefetch},
    };
  }();
  for (Layout layout : {Layout::UnitIsWrapper, Layout::UnitInsideRegion, Layout::TwoUnitsInRegion}) {
    for (const auto& [label, options] : configs) {
      INFO(layout_name(layout) << ", " << label);
      ParitySetup s;
      s.reference = build(layout, /*checkpointed=*/false);
      s.sharded = build(layout, /*checkpointed=*/true);
      shard(layout, *s.sharded, shared_group(), options);
      s.params_sharded = options.strategy != S::NO_SHARD;
      s.prefixes_to_ignore = {kWrapperPrefix};
      check_training_parity(*this, s);
    }
  }
}

TEST_CASE_METHOD(MpFixture, "fsdp checkpoint: the recomputation sees gathered parameters, no extra gathers",
                 "[fsdp]") {
  auto group = shared_group();
  const RowRange rows = shard_rows(6, rank(), size());
  struct Case {
    Layout layout;
    S strategy;
    uint64_t forward_ops, backward_ops;  // weight and bias: one all-gather each; one reduce-scatter
  };
  // The unit around the wrapper gathers in its pre-backward hook, before the checkpoint node recomputes;
  // the unit inside the wrapper gathers in the recomputed pre-forward and stays gathered for its backward.
  // Either way backward costs what it costs without checkpointing.
  for (const Case& c : {Case{Layout::UnitIsWrapper, S::FULL_SHARD, 2, 3},
                        Case{Layout::UnitInsideRegion, S::FULL_SHARD, 2, 3},
                        Case{Layout::UnitIsWrapper, S::SHARD_GRAD_OP, 2, 1},
                        Case{Layout::UnitInsideRegion, S::SHARD_GRAD_OP, 2, 3},
                        Case{Layout::UnitIsWrapper, S::NO_SHARD, 0, 1}}) {
    INFO(layout_name(c.layout) << ", " << fsdp::to_string(c.strategy));
    Generator gen(1);
    auto probe = std::make_shared<ProbeLinear>(gen);
    auto wrapper = std::make_shared<nn::CheckpointWrapper>(probe);
    fsdp::FSDPOptions o = strategy(c.strategy);
    if (c.layout == Layout::UnitIsWrapper) {
      fsdp::fully_shard(*wrapper, group, o);
    } else {
      fsdp::fully_shard(*probe, group, o);
    }
    const uint64_t before = group->sequence_number();
    const Tensor out = (*wrapper)(ones({2, 8}));
    CHECK(group->sequence_number() - before == c.forward_ops);
    autograd::backward(autograd::sum(out));
    CHECK(group->sequence_number() - before == c.forward_ops + c.backward_ops);
    const bool sharded = c.strategy != S::NO_SHARD;
    const std::vector<std::pair<Shape, bool>> expected{{Shape{6, 8}, false}, {Shape{6, 8}, true}};
    CHECK(probe->seen == expected);  // full both times: in forward and in the recomputation
    CHECK(probe->weight().shape() == (sharded ? Shape{rows.count, 8} : Shape{6, 8}));
    CHECK(autograd::grad(probe->weight()).shape() == probe->weight().shape());
    CHECK_FALSE(fsdp::unit_of_module(c.layout == Layout::UnitIsWrapper ? static_cast<nn::Module&>(*wrapper)
                                                                       : static_cast<nn::Module&>(*probe))
                    ->is_unsharded());
  }
}

TEST_CASE_METHOD(MpFixture, "fsdp checkpoint: dropout recomputed under FSDP equals dropout without checkpointing",
                 "[fsdp]") {
  // Each rank draws its own masks, so the reference is FSDP without checkpointing on the same rank with
  // the same generator state: the losses and gradient shards must be equal.
  for (Layout layout : {Layout::UnitIsWrapper, Layout::UnitInsideRegion}) {
    INFO(layout_name(layout));
    auto plain = build(layout, false, 0.4);
    auto ckpt = build(layout, true, 0.4);
    shard(layout, *plain, shared_group(), {});  // units on the blocks: the same parameters in each unit
    shard(layout, *ckpt, shared_group(), {});
    Generator data(7 + static_cast<uint64_t>(rank()));
    for (int step = 0; step < 2; ++step) {
      const Tensor x = rand({3, 8}, {}, &data);
      Tensor losses[2];
      for (int which = 0; which < 2; ++which) {
        manual_seed(500 + static_cast<uint64_t>(step * 10 + rank()));
        auto& m = which == 0 ? plain : ckpt;
        m->zero_grad();
        losses[which] = autograd::sum((*m)(x));
        autograd::backward(losses[which]);
      }
      CHECK(allclose(losses[0], losses[1], 1e-6, 1e-6));
      const auto a = plain->parameters(), b = ckpt->parameters();
      REQUIRE(a.size() == b.size());
      for (size_t i = 0; i < a.size(); ++i) CHECK(allclose(autograd::grad(a[i]), autograd::grad(b[i]), 1e-5, 1e-6));
    }
  }
}
