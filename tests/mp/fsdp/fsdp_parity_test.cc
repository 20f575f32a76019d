// FSDP against one process on the concatenated batch: each rank trains a sharded copy on its slice of the
// global batch while a plain copy (built from the same seed on every rank) trains on the whole batch. After
// every step the losses, each rank's parameter and gradient shards (common_fsdp's check_sharded_parity) and
// the gathered full parameters equal the reference's (rtol 1e-5, float32). Models from torch's
// common_fsdp.py: an MLP stack (one unit per Linear) and NestedWrappedModule (common_fsdp's nested units plus the root).
#include "parallel/fsdp/fully_shard.h"
#include "parallel/fsdp/unit_registry.h"
#include "tests/mp/fsdp/fsdp_models.h"
#include "tests/mp/fsdp/fsdp_parity_util.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
namespace fsdp = braid::parallel::fsdp;

namespace {

enum class Model { Mlp, NarrowMlp, Nested };

std::shared_ptr<nn::Module> build(Model m, uint64_t seed) {
  if (m == Model::Mlp) return make_mlp(seed);
  if (m == Model::NarrowMlp) return make_narrow_mlp(seed);
  return std::make_shared<NestedWrappedModule>(seed);
}

// common_fsdp's wrapping: every Linear of the MLP; NestedWrappedModule's three targets; then the root. Only
// the nested model's root casts its outputs (mixed_precision.output_dtype), as a user would ask.
void shard(Model m, nn::Module& model, const std::shared_ptr<ProcessGroup>& group, const fsdp::FSDPOptions& o) {
  fsdp::FSDPOptions inner = o;
  inner.mixed_precision.output_dtype.reset();
  if (m != Model::Nested) {
    fsdp::apply_fully_shard(model, group, inner, fsdp::module_type_policy({"Linear"}));
    return;
  }
  for (nn::Module* target : static_cast<NestedWrappedModule&>(model).wrap_targets()) {
    fsdp::fully_shard(*target, group, inner);
  }
  fsdp::fully_shard(model, group, o);
}

using Tolerance = ParityTolerance;

void check_parity(MpFixture& f, Model which, const fsdp::FSDPOptions& options, Tolerance tol = {}) {
  ParitySetup s;
  s.reference = build(which, 42);
  s.sharded = build(which, 42);
  shard(which, *s.sharded, f.shared_group(), options);
  s.params_sharded = options.strategy != fsdp::ShardingStrategy::NO_SHARD;
  s.tol = tol;
  check_training_parity(f, s);
}

fsdp::FSDPOptions strategy(fsdp::ShardingStrategy s, std::optional<bool> reshard = std::nullopt) {
  fsdp::FSDPOptions o;
  o.strategy = s;
  o.reshard_after_forward = reshard;
  return o;
}

fsdp::FSDPOptions prefetching(fsdp::FSDPOptions o, bool backward = false) {
  o.forward_prefetch = true;
  o.backward_prefetch = backward;
  return o;
}

fsdp::FSDPOptions offloading(fsdp::FSDPOptions o) {
  o.offload_params = true;
  return o;
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "fsdp: training equals one process on the whole batch", "[fsdp]") {
  using S = fsdp::ShardingStrategy;
  const std::vector<std::pair<std::string, fsdp::FSDPOptions>> configs = {
      {"FULL_SHARD", strategy(S::FULL_SHARD)},
      {"FULL_SHARD, reshard_after_forward=false", strategy(S::FULL_SHARD, false)},
      {"SHARD_GRAD_OP", strategy(S::SHARD_GRAD_OP)},
      {"SHARD_GRAD_OP, reshard_after_forward=true", strategy(S::SHARD_GRAD_OP, true)},
      {"NO_SHARD", strategy(S::NO_SHARD)},
      {"FULL_SHARD, forward_prefetch", prefetching(strategy(S::FULL_SHARD))},
      {"SHARD_GRAD_OP, forward_prefetch", prefetching(strategy(S::SHARD_GRAD_OP))},
      {"FULL_SHARD, forward and backward prefetch", prefetching(strategy(S::FULL_SHARD), true)},
      {"FULL_SHARD, offload_params (CPU parameters: nothing moves)", offloading(strategy(S::FULL_SHARD))},
  };
  for (Model m : {Model::Mlp, Model::NarrowMlp, Model::Nested}) {
    for (const auto& [label, options] : configs) {
      INFO((m == Model::Mlp ? "mlp, " : m == Model::NarrowMlp ? "narrow mlp, " : "nested, ") << label);
      check_parity(*this, m, options);
    }
  }
}

TEST_CASE_METHOD(MpFixture, "fsdp: mixed precision computes and reduces in other dtypes, shards keep theirs",
                 "[fsdp]") {
  using S = fsdp::ShardingStrategy;
  SECTION("float64 compute and reduction: as exact as float32") {
    fsdp::FSDPOptions o = strategy(S::FULL_SHARD);
    o.mixed_precision.param_dtype = DType::Float64;
    check_parity(*this, Model::Mlp, o);  // float64 out of the last Linear; the loss promotes the target
    o.mixed_precision.output_dtype = DType::Float32;
    check_parity(*this, Model::Nested, o);
  }
  SECTION("bfloat16 reduction: within bfloat16's precision") {
    fsdp::FSDPOptions o = strategy(S::SHARD_GRAD_OP);
    o.mixed_precision.reduce_dtype = DType::BFloat16;
    check_parity(*this, Model::Mlp, o, {.rtol = 2e-2, .atol = 2e-3});
  }
  SECTION("NO_SHARD reduces in float64") {
    fsdp::FSDPOptions o = strategy(S::NO_SHARD);
    o.mixed_precision.reduce_dtype = DType::Float64;
    check_parity(*this, Model::Nested, o);
  }
}
