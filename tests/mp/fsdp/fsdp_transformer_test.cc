// FSDP parity on the TransformerWithSharedParams of torch's common_fsdp.py: its wrapping (one unit per
// encoder and decoder layer, ModuleWrapPolicy, then the root, which holds the tied embedding/output table)
// against one process on the concatenated batch. After every step: the loss, each rank's parameter and
// gradient shards, and the gathered full parameters equal the reference's (rtol 1e-5, float32).
#include <algorithm>
#include <cmath>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "nn/optim/sgd.h"
#include "parallel/fsdp/fully_shard.h"
#include "tensor/compare.h"
#include "tests/mp/fsdp/fsdp_parity_util.h"
#include "tests/mp/fsdp/transformer_with_shared_params.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
namespace fsdp = braid::parallel::fsdp;

namespace {

constexpr int64_t kLocalBatch = 2;  // common_fsdp's bs
constexpr int64_t kSrcLen = 6;      // common_fsdp's src is 6 x bs, tgt 4 x bs
constexpr int64_t kTgtLen = 4;
constexpr int kSteps = 3;

// The summed loss (common_fsdp's) gives gradients up to ~10 whose elements near 0 differ by float32 rounding
// (measured: ~1e-6 absolute where the tensor's largest element is ~7) between one process and the sum of
// the ranks' halves. So an element may also differ by rtol times the tensor's largest magnitude.
double gradient_atol(const Tensor& ref_grad) {
  double largest = 0.0;
  for (double v : to_vector<double>(ref_grad.to(DType::Float64))) largest = std::max(largest, std::abs(v));
  return kAtol + kRtol * largest;
}

// Rank r's columns (the batch is dim 1, sequence first) of a [T, world * bs] id tensor.
Tensor local_batch(const Tensor& ids, int rank) {
  return ids.narrow(1, rank * kLocalBatch, kLocalBatch).contiguous();
}

void check_transformer_parity(MpFixture& f, const fsdp::FSDPOptions& options) {
  const int ws = f.size(), r = f.rank();
  auto group = f.shared_group();
  auto reference = std::make_shared<TransformerWithSharedParams>(0);
  auto sharded = std::make_shared<TransformerWithSharedParams>(0);
  fsdp::apply_fully_shard(*sharded, group, options,
                          fsdp::module_type_policy({"TransformerEncoderLayer", "TransformerDecoderLayer"}));
  nn::optim::SGD ref_opt(reference->parameters(), {.lr = 0.01});
  nn::optim::SGD opt(sharded->parameters(), {.lr = 0.01});
  const bool sharded_params = options.strategy != fsdp::ShardingStrategy::NO_SHARD;

  for (int step = 0; step < kSteps; ++step) {
    INFO("step " << step);
    Generator gen(2000 + static_cast<uint64_t>(step));
    const Tensor src = randint(0, TransformerWithSharedParams::kVocab, {kSrcLen, ws * kLocalBatch}, DType::Int64, &gen);
    const Tensor tgt = randint(0, TransformerWithSharedParams::kVocab, {kTgtLen, ws * kLocalBatch}, DType::Int64, &gen);
    // common_fsdp sums the loss; FSDP averages gradients over ranks, so the whole-batch reference is the
    // sum divided by the world size.
    const Tensor ref_loss = autograd::div(
        TransformerWithSharedParams::loss((*reference)(nn::TensorList{src, tgt})[0], tgt), static_cast<double>(ws));
    autograd::backward(ref_loss);
    const Tensor my_tgt = local_batch(tgt, r);
    const Tensor loss =
        TransformerWithSharedParams::loss((*sharded)(nn::TensorList{local_batch(src, r), my_tgt})[0], my_tgt);
    autograd::backward(loss);

    const double ref_value = ref_loss.item<double>();
    CHECK(std::abs(average_over_ranks(group, loss.item<double>()) - ref_value) <= kRtol * std::abs(ref_value));

    const auto ref_params = reference->named_parameters();
    const auto params = sharded->named_parameters();
    REQUIRE(ref_params.size() == params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      INFO(params[i].first);
      CHECK(params[i].first == ref_params[i].first);
      const Tensor& ref = ref_params[i].second;
      const Tensor& p = params[i].second;
      const Tensor want = sharded_params ? expected_shard(ref, r, ws) : ref;
      CHECK(p.shape() == want.shape());
      CHECK(allclose(p, want, kRtol, kAtol));
      const Tensor g = autograd::grad(p);
      REQUIRE(g.defined());
      const Tensor ref_g = autograd::grad(ref);
      const Tensor want_g = sharded_params ? expected_shard(ref_g, r, ws) : ref_g;
      CHECK(allclose(g, want_g, kRtol, gradient_atol(ref_g)));
    }
    ref_opt.step();
    opt.step();
    ref_opt.zero_grad();
    opt.zero_grad();

    with_full_parameters(*sharded, [&] {
      const auto full_params = sharded->named_parameters();
      for (size_t i = 0; i < full_params.size(); ++i) {
        INFO(full_params[i].first);
        CHECK(full_params[i].second.shape() == ref_params[i].second.shape());
        CHECK(allclose(full_params[i].second, ref_params[i].second, kRtol, kAtol));
      }
    });
  }
}

fsdp::FSDPOptions with_strategy(fsdp::ShardingStrategy s) {
  fsdp::FSDPOptions o;
  o.strategy = s;
  return o;
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "fsdp: TransformerWithSharedParams trains as one process on the whole batch",
                 "[fsdp]") {
  using S = fsdp::ShardingStrategy;
  SECTION("the tied table is one parameter, in the root's unit") {
    TransformerWithSharedParams model(0);
    int tables = 0;
    for (const auto& [name, p] : model.named_parameters()) tables += p.shape() == Shape{23, 16} ? 1 : 0;
    CHECK(tables == 1);
    CHECK(model.named_parameters().front().first == "embed_tokens.weight");
  }
  SECTION("FULL_SHARD") { check_transformer_parity(*this, with_strategy(S::FULL_SHARD)); }
  SECTION("SHARD_GRAD_OP") { check_transformer_parity(*this, with_strategy(S::SHARD_GRAD_OP)); }
  SECTION("NO_SHARD") { check_transformer_parity(*this, with_strategy(S::NO_SHARD)); }
  SECTION("FULL_SHARD, forward and backward prefetch") {
    fsdp::FSDPOptions o = with_strategy(S::FULL_SHARD);
    o.forward_prefetch = true;
    o.backward_prefetch = true;
    check_transformer_parity(*this, o);
  }
}
