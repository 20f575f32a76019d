// Post-local SGD (torch's post_localSGD_hook, PeriodicModelAverager and PostLocalSGDOptimizer): the hook
// averages over the whole group for start_localSGD_iter iterations and then only within the subgroup
// (nullptr: each rank keeps its own gradients); the averager averages the parameters every `period` steps
// after the warm-up; together the replicas drift apart between averagings and agree right after one.
#include "autograd/engine.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/variable.h"
#include "nn/optim/sgd.h"
#include "parallel/ddp/ddp.h"
#include "parallel/local_sgd/post_local_sgd.h"
#include "tensor/compare.h"
#include "tests/mp/parallel/ddp_models.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using Catch::Contains;

namespace {

// This rank's batch of step s: different on every rank, so that local gradients differ.
std::pair<Tensor, Tensor> batch(int rank, int step) {
  Generator gen(500 + static_cast<uint64_t>(step * 16 + rank));
  return {rand({3, 2}, {}, &gen), rand({3, 4}, {}, &gen)};
}

// The gradients one backward of `model` (not wrapped) gives on this rank's batch.
std::vector<Tensor> local_grads(nn::Module& model, int rank, int step) {
  model.zero_grad();
  const auto [x, y] = batch(rank, step);
  autograd::backward(autograd::mse_loss(model.forward(x), y));
  std::vector<Tensor> out;
  for (const auto& p : model.parameters()) out.push_back(autograd::grad(p).clone());
  model.zero_grad();
  return out;
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "post_localSGD_hook: global averages first, then each rank's own gradients",
                 "[local_sgd][hook]") {
  auto pg = shared_group();
  auto model = std::make_shared<ParityNet>(21);
  auto twin = std::make_shared<ParityNet>(21);  // the same weights, never wrapped: local gradients
  parallel::DDPOptions o;
  o.process_group = pg;
  parallel::DistributedDataParallel ddp(model, o);
  auto state = std::make_shared<parallel::PostLocalSGDState>(pg, nullptr, 2);
  ddp.register_comm_hook(parallel::post_localsgd_hook(state));
  for (int step = 0; step < 4; ++step) {
    INFO("step " << step);
    const auto [x, y] = batch(rank(), step);
    autograd::backward(autograd::mse_loss(ddp.forward(x), y));
    const auto mine = local_grads(*twin, rank(), step);
    const auto params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor g = autograd::grad(params[i]);
      if (step < 2) {
        TensorList avg{mine[i].clone()};
        finish(pg->allreduce(avg));
        CHECK(allclose(g, braid::div(avg[0], double(size())), 1e-5, 1e-7));
      } else {
        CHECK(allclose(g, mine[i], 1e-5, 1e-7));
      }
    }
    model->zero_grad();
  }
  CHECK(state->iteration() == 2);
}

TEST_CASE_METHOD(MpFixture, "post_localSGD_hook: a subgroup of the whole group keeps averaging globally",
                 "[local_sgd][hook]") {
  auto pg = shared_group();
  auto model = std::make_shared<ParityNet>(22);
  auto twin = std::make_shared<ParityNet>(22);
  parallel::DDPOptions o;
  o.process_group = pg;
  parallel::DistributedDataParallel ddp(model, o);
  ddp.register_comm_hook(parallel::post_localsgd_hook(std::make_shared<parallel::PostLocalSGDState>(pg, pg, 1)));
  for (int step = 0; step < 3; ++step) {
    const auto [x, y] = batch(rank(), step);
    autograd::backward(autograd::mse_loss(ddp.forward(x), y));
    const auto mine = local_grads(*twin, rank(), step);
    const auto params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      TensorList avg{mine[i].clone()};
      finish(pg->allreduce(avg));
      CHECK(allclose(autograd::grad(params[i]), braid::div(avg[0], double(size())), 1e-5, 1e-7));
    }
    model->zero_grad();
  }
}

TEST_CASE_METHOD(MpFixture, "PostLocalSGDOptimizer: replicas drift between averagings and agree after each",
                 "[local_sgd][averager]") {
  auto pg = shared_group();
  auto model = std::make_shared<ParityNet>(23);
  parallel::DDPOptions o;
  o.process_group = pg;
  parallel::DistributedDataParallel ddp(model, o);
  // Global gradients in iteration 0, local from iteration 1 on; parameters averaged every 2 steps after a
  // warm-up of 1 (steps 1, 3, 5).
  ddp.register_comm_hook(parallel::post_localsgd_hook(std::make_shared<parallel::PostLocalSGDState>(pg, nullptr, 1)));
  nn::optim::SGDOptions so;
  so.lr = 0.5;
  parallel::PostLocalSGDOptimizer opt(std::make_unique<nn::optim::SGD>(model->parameters(), so),
                                      std::make_shared<parallel::PeriodicModelAverager>(pg, 2, 1));
  for (int step = 0; step < 6; ++step) {
    INFO("step " << step);
    const auto [x, y] = batch(rank(), step);
    autograd::backward(autograd::mse_loss(ddp.forward(x), y));
    opt.step();
    opt.zero_grad();
    // Equal on every rank exactly when this step's gradients or parameters were averaged.
    const bool averaged = step == 0 || (step - 1) % 2 == 0;
    bool all_equal = true;
    for (const auto& p : model->parameters()) {
      TensorList avg{p.clone()};
      finish(pg->allreduce(avg));
      all_equal = all_equal && allclose(p, braid::div(avg[0], double(size())), 1e-6, 1e-7);
    }
    CHECK(all_equal == averaged);
  }
  CHECK(opt.averager().step() == 6);
}

TEST_CASE_METHOD(MpFixture, "post-local SGD: argument errors", "[local_sgd][checks]") {
  auto pg = shared_group();
  CHECK_THROWS_WITH(parallel::PostLocalSGDState(pg, nullptr, 0), Contains("start_localSGD_iter must be at least 1"));
  CHECK_THROWS_WITH(parallel::PostLocalSGDState(nullptr, nullptr, 1), Contains("post_localsgd_hook"));
  CHECK_THROWS_WITH(parallel::PeriodicModelAverager(pg, 0), Contains("Arg ``period`` must be a positive value"));
  CHECK_THROWS_WITH(parallel::PeriodicModelAverager(pg, 2, -1), Contains("``warmup_steps`` must be a non-negative"));
  CHECK_THROWS_WITH(parallel::post_localsgd_hook(nullptr), Contains("the state is null"));
}
