// ZeroRedundancyOptimizer (torch's test_zero_redundancy_optimizer.py, on the CPU): over several steps DDP +
// ZeRO equals DDP + the plain optimizer on every rank (SGD with momentum, Adam); the state is sharded (each
// rank's local optimizer holds only its partition, and the partition is torch's greedy one); the
// consolidated state dict equals the plain optimizer's and loads back; the refusals.
#include "autograd/engine.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/variable.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "parallel/ddp/ddp.h"
#include "parallel/zero/zero_redundancy_optimizer.h"
#include "tensor/compare.h"
#include "tests/mp/parallel/ddp_models.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using nn::optim::Optimizer;
using parallel::ZeroRedundancyOptimizer;
using Catch::Contains;

namespace {

using Factory = std::function<std::unique_ptr<Optimizer>(TensorList, std::vector<std::string>)>;

Factory sgd_factory() {
  return [](TensorList p, std::vector<std::string>) {
    nn::optim::SGDOptions o;
    o.lr = 0.1;
    o.momentum = 0.9;
    return std::make_unique<nn::optim::SGD>(std::move(p), o);
  };
}

Factory adam_factory() {
  return [](TensorList p, std::vector<std::string>) {
    nn::optim::AdamOptions o;
    o.lr = 0.01;
    return std::make_unique<nn::optim::Adam>(std::move(p), o);
  };
}

// Trains two DDP replicas of ParityNet on the same batches, one stepped by `plain` (over every
// parameter), one by ZeRO; returns both models' parameters after each step for the caller to compare.
void check_zero_equals_plain(MpFixture& f, const Factory& make, int steps) {
  auto a = std::make_shared<ParityNet>(11);
  auto b = std::make_shared<ParityNet>(11);
  parallel::DDPOptions o;
  o.process_group = f.shared_group();
  parallel::DistributedDataParallel ddp_a(a, o);
  parallel::DistributedDataParallel ddp_b(b, o);
  const auto plain = make(a->parameters(), {});
  ZeroRedundancyOptimizer zero(b->named_parameters(), make, f.shared_group());
  for (int s = 0; s < steps; ++s) {
    INFO("step " << s);
    Generator gen(100 + static_cast<uint64_t>(s * f.size() + f.rank()));
    const Tensor x = rand({3, 2}, {}, &gen);
    const Tensor y = rand({3, 4}, {}, &gen);
    autograd::backward(autograd::mse_loss(ddp_a.forward(x), y));
    autograd::backward(autograd::mse_loss(ddp_b.forward(x), y));
    plain->step();
    zero.step();
    plain->zero_grad();
    zero.zero_grad();
    const auto pa = a->parameters(), pb = b->parameters();
    for (size_t i = 0; i < pa.size(); ++i) CHECK(allclose(pb[i], pa[i], 1e-6, 1e-7));
  }
  // The local optimizer holds state for this rank's parameters only.
  size_t with_state = 0;
  for (size_t li = 0; li < zero.local_indices().size(); ++li) with_state += zero.local_optimizer().state(li).empty() ? 0 : 1;
  CHECK(with_state == zero.local_indices().size());
  // Consolidated on the last rank: the plain optimizer's state, by global index.
  const int to = f.size() - 1;
  zero.consolidate_state_dict(to);
  if (f.rank() == to) {
    const auto whole = zero.state_dict();
    const auto want = plain->state_dict();
    CHECK(whole.num_params == want.num_params);
    CHECK(whole.options == want.options);
    REQUIRE(whole.state.size() == want.state.size());
    for (const auto& [i, st] : want.state) {
      INFO("parameter " << i);
      REQUIRE(whole.state.count(i) == 1);
      for (const auto& [name, t] : st) CHECK(allclose(whole.state.at(i).at(name), t, 1e-6, 1e-7));
    }
    // Loading it back (here on the consolidating rank's own optimizer) keeps the values.
    zero.load_state_dict(whole);
  } else {
    CHECK_THROWS_WITH(zero.state_dict(), Contains("Optimizer state has not been consolidated on this rank"));
  }
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "ZeroRedundancyOptimizer: torch's greedy partition", "[zero]") {
  const TensorList params{zeros({10}), zeros({3}), zeros({7}), zeros({7}), zeros({1})};
  // Largest first: 10 -> r0; 7 (index 2) -> r1; 7 (index 3) -> r1 on 2 ranks (7 < 10), r2 on 3 ranks.
  CHECK(parallel::partition_parameters(params, 2) == std::vector<int>{0, 0, 1, 1, 0});
  CHECK(parallel::partition_parameters(params, 3) == std::vector<int>{0, 1, 1, 2, 2});
  CHECK(parallel::partition_parameters(params, 1) == std::vector<int>{0, 0, 0, 0, 0});
}

TEST_CASE_METHOD(MpFixture, "ZeroRedundancyOptimizer: DDP + ZeRO(SGD, momentum) equals DDP + SGD", "[zero]") {
  check_zero_equals_plain(*this, sgd_factory(), 4);
}

TEST_CASE_METHOD(MpFixture, "ZeroRedundancyOptimizer: DDP + ZeRO(Adam) equals DDP + Adam", "[zero]") {
  check_zero_equals_plain(*this, adam_factory(), 3);
}

TEST_CASE_METHOD(MpFixture, "ZeroRedundancyOptimizer: refusals", "[zero][checks]") {
  auto pg = shared_group();
  CHECK_THROWS_WITH(ZeroRedundancyOptimizer({}, sgd_factory(), pg), Contains("optimizer got an empty parameter list"));
  CHECK_THROWS_WITH(ZeroRedundancyOptimizer({{"w", zeros({2})}}, sgd_factory(), nullptr),
                    Contains("the process group is null"));
  ZeroRedundancyOptimizer z({{"w", zeros({2})}}, sgd_factory(), pg);
  CHECK_THROWS_WITH(z.consolidate_state_dict(size()), Contains("is not in group"));
  nn::optim::OptimizerStateDict wrong;
  wrong.num_params = 3;
  CHECK_THROWS_WITH(z.load_state_dict(wrong), Contains("the state dict has 3 parameters, the optimizer 1"));
}
