// FSDP parity on more of torch's common_fsdp.py models (common_fsdp_models.h): NonUniformReqGradNWM (frozen
// parameters, units with no trainable shard), ModuleWithDelay (sleeps around the reductions),
// DoubleLinear (two outputs; an unused Linear), MLPStack (one unit per MLP) and AlwaysWrap (every module
// of NestedWrappedModule its own unit). Each trains sharded on its slice of the batch and must equal one
// process on the whole batch (fsdp_parity_util.h), under FULL_SHARD and SHARD_GRAD_OP.
#include "parallel/fsdp/fully_shard.h"
#include "tests/mp/fsdp/common_fsdp_models.h"
#include "tests/mp/fsdp/fsdp_parity_util.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
namespace fsdp = braid::parallel::fsdp;

namespace {

const std::vector<std::pair<std::string, fsdp::ShardingStrategy>> kStrategies = {
    {"FULL_SHARD", fsdp::ShardingStrategy::FULL_SHARD}, {"SHARD_GRAD_OP", fsdp::ShardingStrategy::SHARD_GRAD_OP}};

fsdp::FSDPOptions with(fsdp::ShardingStrategy s) {
  fsdp::FSDPOptions o;
  o.strategy = s;
  return o;
}

template <class Build, class Shard>
void check_model(MpFixture& f, const Build& build, const Shard& shard, int64_t features = 8) {
  for (const auto& [label, strategy] : kStrategies) {
    INFO(label);
    ParitySetup s;
    s.reference = build();
    s.sharded = build();
    shard(*s.sharded, f.shared_group(), with(strategy));
    s.in_features = s.out_features = features;
    check_training_parity(f, s);
  }
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "fsdp common models: NonUniformReqGradNWM (frozen parameters)", "[fsdp][common]") {
  check_model(
      *this, [] { return std::make_shared<NonUniformReqGradNWM>(5); },
      [](nn::Module& m, const std::shared_ptr<ProcessGroup>& g, const fsdp::FSDPOptions& o) {
        for (nn::Module* t : static_cast<NonUniformReqGradNWM&>(m).wrap_targets()) fsdp::fully_shard(*t, g, o);
        fsdp::fully_shard(m, g, o);
      });
}

TEST_CASE_METHOD(MpFixture, "fsdp common models: ModuleWithDelay around NestedWrappedModule", "[fsdp][common]") {
  check_model(
      *this, [] { return std::make_shared<ModuleWithDelay>(6, 2, 3); },
      [](nn::Module& m, const std::shared_ptr<ProcessGroup>& g, const fsdp::FSDPOptions& o) {
        for (nn::Module* t : static_cast<ModuleWithDelay&>(m).module->wrap_targets()) fsdp::fully_shard(*t, g, o);
        fsdp::fully_shard(m, g, o);
      });
}

TEST_CASE_METHOD(MpFixture, "fsdp common models: DoubleLinear with two outputs and with an unused Linear",
                 "[fsdp][common]") {
  const auto shard = [](nn::Module& m, const std::shared_ptr<ProcessGroup>& g, const fsdp::FSDPOptions& o) {
    fsdp::fully_shard(*static_cast<DoubleLinearNet&>(m).double_linear, g, o);
    fsdp::fully_shard(m, g, o);
  };
  check_model(*this, [] { return std::make_shared<DoubleLinearNet>(7, true); }, shard);
  // lin2 takes no part: no gradient in the reference, none (or zeros) under FSDP, and the update leaves it.
  check_model(*this, [] { return std::make_shared<DoubleLinearNet>(7, false); }, shard);
}

TEST_CASE_METHOD(MpFixture, "fsdp common models: MLPStack, one unit per MLP", "[fsdp][common]") {
  check_model(
      *this, [] { return make_mlp_stack(8, 8); },
      [](nn::Module& m, const std::shared_ptr<ProcessGroup>& g, const fsdp::FSDPOptions& o) {
        fsdp::apply_fully_shard(m, g, o, fsdp::module_type_policy({"MLP"}));
      });
}

TEST_CASE_METHOD(MpFixture, "fsdp common models: AlwaysWrap (every module of NestedWrappedModule a unit)",
                 "[fsdp][common]") {
  check_model(
      *this, [] { return std::make_shared<runtime::NestedWrappedModule>(9); },
      [](nn::Module& m, const std::shared_ptr<ProcessGroup>& g, const fsdp::FSDPOptions& o) {
        // torch's always_wrap_policy: every submodule that still holds unwrapped parameters.
        fsdp::apply_fully_shard(m, g, o, [](const nn::Module&, const std::string&, int64_t unwrapped) {
          return unwrapped > 0;
        });
      });
}
