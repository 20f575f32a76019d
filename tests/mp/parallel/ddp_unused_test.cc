// DDP's unused-parameter and ignored-output scenarios of torch's test_c10d_gloo.py (test_ignored_output,
// test_ignored_output_with_unused_parameters and test_global_local_unused_params_grad): ReducerTest's mixed
// model with and without fc3, outputs discarded without backward, an empty local unused set that must still
// take part in the used-map allreduce, and Adam over iterations whose used set changes.
#include "autograd/engine.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "nn/optim/adam.h"
#include "parallel/ddp/ddp.h"
#include "tensor/compare.h"
#include "tests/mp/parallel/ddp_models.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using parallel::DDPOptions;
using parallel::DistributedDataParallel;

namespace {

// ReducerTest's ReducerModule: fc1(2->10), fc2(10->4), fc3(4->4), bias-free, ReLU, softmax; use_fc3 toggles.
class ReducerModule : public nn::Module {
 public:
  ReducerModule() : nn::Module("ReducerModule") {
    Generator gen(99);
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(2, 10, false, &gen));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(10, 4, false, &gen));
    fc3 = register_module("fc3", std::make_shared<nn::Linear>(4, 4, false, &gen));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = autograd::relu(fc2->forward(autograd::relu(fc1->forward(x))));
    if (use_fc3) h = autograd::relu(fc3->forward(h));
    return autograd::softmax(h, 1);
  }
  bool use_fc3 = true;
  std::shared_ptr<nn::Linear> fc1, fc2, fc3;
};

}  // namespace

TEST_CASE_METHOD(MpFixture, "ddp: an unused fc3 keeps no gradient with find_unused_parameters", "[ddp][unused]") {
  auto model = std::make_shared<ReducerModule>();
  model->use_fc3 = false;
  DDPOptions o;
  o.process_group = shared_group();
  o.find_unused_parameters = true;
  DistributedDataParallel ddp(model, o);
  const Tensor target = from_vector<int64_t>({0, 1, 2, 3}, {4});
  for (int it = 0; it < 2; ++it) {
    autograd::backward(autograd::cross_entropy(ddp.forward(rand({4, 2})), target));
    CHECK(autograd::grad(model->fc1->weight()).defined());
    CHECK_FALSE(autograd::grad(model->fc3->weight()).defined());  // unused on every rank
  }
}

TEST_CASE_METHOD(MpFixture, "ddp: outputs discarded without backward leave nothing pending", "[ddp][unused]") {
  for (bool find_unused : {false, true}) {
    INFO("find_unused_parameters " << find_unused);
    auto model = std::make_shared<ReducerModule>();
    model->use_fc3 = !find_unused;  // with find_unused, fc3 is also an unused parameter
    DDPOptions o;
    o.process_group = shared_group();
    o.find_unused_parameters = find_unused;
    DistributedDataParallel ddp(model, o);
    const Tensor target = from_vector<int64_t>({0, 1, 2, 3}, {4});
    for (int i = 0; i < 4; ++i) (void)ddp.forward(rand({4, 2}));  // ignored outputs
    for (int i = 0; i < 4; ++i) {
      CHECK_NOTHROW(autograd::backward(autograd::cross_entropy(ddp.forward(rand({4, 2})), target)));
    }
    CHECK(ddp.logging_data().iteration == 4);
  }
}

TEST_CASE_METHOD(MpFixture, "ddp: an empty local unused set still joins the used-map allreduce", "[ddp][unused]") {
  // Rank 0 uses t1(t0(x)) (nothing unused), the others t1(x) (t0 unused): every task gets a gradient.
  struct TwoTasks : nn::Module {
    TwoTasks() : nn::Module("TwoTasks") {
      t0 = register_module("t0", std::make_shared<Task>());
      t1 = register_module("t1", std::make_shared<Task>());
    }
    Tensor forward(const Tensor& x) override { return rank == 0 ? t1->forward(t0->forward(x)) : t1->forward(x); }
    std::shared_ptr<Task> t0, t1;
    int rank = 0;
  };
  auto model = std::make_shared<TwoTasks>();
  model->rank = rank();
  DDPOptions o;
  o.process_group = shared_group();
  o.find_unused_parameters = true;
  DistributedDataParallel ddp(model, o);
  autograd::backward(autograd::mean(ddp.forward(full({2, 2}, 8.0))));
  CHECK(allclose(autograd::grad(model->t0->p), full({2, 2}, 0.25 / size())));
  CHECK(allclose(autograd::grad(model->t1->p), full({2, 2}, 0.25)));
}

TEST_CASE_METHOD(MpFixture, "ddp: Adam over iterations whose used set changes", "[ddp][unused]") {
  auto model = std::make_shared<ReducerModule>();
  DDPOptions o;
  o.process_group = shared_group();
  o.find_unused_parameters = true;
  DistributedDataParallel ddp(model, o);
  nn::optim::Adam adam(model->parameters());
  const Tensor target = from_vector<int64_t>({0, 1, 2, 3}, {4});
  for (int i = 0; i < 3; ++i) {
    model->use_fc3 = i > 0;
    adam.zero_grad();
    CHECK_NOTHROW(autograd::backward(autograd::cross_entropy(ddp.forward(rand({4, 2})), target)));
    CHECK_NOTHROW(adam.step());
    CHECK(autograd::grad(model->fc3->weight()).defined() == (i > 0));
  }
}
