// DDP join (PyTorch's ddp.join() for uneven inputs): rank r trains r + 1 iterations; the ranks that finish early shadow the others.
// Every iteration's gradient is the sum of the active ranks' gradients over the initial world size (or
// over the active ranks), and afterwards every rank holds the parameters of the last rank to finish.
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "parallel/ddp/ddp.h"
#include "tensor/compare.h"
#include "tests/mp/parallel/ddp_models.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using parallel::DDPOptions;
using parallel::DistributedDataParallel;

namespace {

class Scale : public nn::Module {
 public:
  Scale() : nn::Module("Scale") {
    w = register_parameter("w", ones({2}));
    running = register_buffer("running", zeros({1}));
  }
  Tensor forward(const Tensor& x) override { return autograd::mul(w, x); }
  Tensor w, running;
};

}  // namespace

TEST_CASE_METHOD(MpFixture, "ddp join: uneven inputs, averaged gradients and the final parameters", "[ddp][join]") {
  const int r = rank(), ws = size();
  for (bool by_initial : {true, false}) {
    INFO("divide_by_initial_world_size " << by_initial);
    auto model = std::make_shared<Scale>();
    DDPOptions o;
    o.process_group = shared_group();
    DistributedDataParallel ddp(model, o);
    {
      auto join = ddp.join(by_initial);
      for (int it = 0; it <= r; ++it) {
        INFO("iteration " << it);
        model->running.fill_(static_cast<double>(100 * r + it));  // broadcast from a training rank each forward
        autograd::backward(autograd::sum(ddp.forward(full({2}, static_cast<double>(r + 1)))));
        // Ranks it..ws-1 train in iteration `it`; rank q's local gradient is q + 1 per element.
        double sum = 0;
        for (int q = it; q < ws; ++q) sum += q + 1;
        const double expected = sum / (by_initial ? ws : ws - it);
        CHECK(allclose(autograd::grad(model->w), full({2}, expected)));
        autograd::NoGradGuard no_grad;
        model->w.sub_(mul(autograd::grad(model->w), 0.125));  // exact in float32
        model->zero_grad();
      }
    }
    // Everyone ends with the parameters of the last rank to finish (ws - 1).
    double w = 1;
    for (int it = 0; it < ws; ++it) {
      double sum = 0;
      for (int q = it; q < ws; ++q) sum += q + 1;
      w -= 0.125 * sum / (by_initial ? ws : ws - it);
    }
    CHECK(allclose(model->w, full({2}, w)));
    CHECK(ddp.logging_data().iteration == r + 1);
  }
}

// A buffer comm hook under a Join (PyTorch's join hook calls it on joined ranks too): rank r trains r + 1
// iterations; the hook sums `running` over all ranks. Training ranks set it to 1 before each forward; a
// joined rank still holds the previous sum, so iteration t's sum is (ws - t) + t * sum(t - 1). Every rank
// calls the hook once per iteration of the longest rank, and nobody waits for a collective that does not
// come, before or after the forward.
TEST_CASE_METHOD(MpFixture, "ddp join: a buffer comm hook runs on the joined ranks too", "[ddp][join][buffer_hook]") {
  const int r = rank(), ws = size();
  for (auto location : {parallel::BufferCommHookLocation::kPreForward, parallel::BufferCommHookLocation::kPostForward}) {
    INFO((location == parallel::BufferCommHookLocation::kPreForward ? "before" : "after") << " the forward");
    auto model = std::make_shared<Scale>();
    DDPOptions o;
    o.process_group = shared_group();
    DistributedDataParallel ddp(model, o);
    int calls = 0;
    auto group = shared_group();
    ddp.register_buffer_comm_hook(
        [&calls, group](const std::map<std::string, Tensor>& named) {
          ++calls;
          for (const auto& [name, buffer] : named) {
            collectives::TensorList list{buffer};
            group->allreduce(list)->wait();
          }
          return std::vector<Future<Tensor>>{};
        },
        location);
    std::vector<double> sums{static_cast<double>(ws)};
    for (int t = 1; t < ws; ++t) sums.push_back((ws - t) + t * sums.back());
    {
      auto join = ddp.join();
      for (int it = 0; it <= r; ++it) {
        INFO("iteration " << it);
        model->running.fill_(1.0);
        const Tensor out = ddp.forward(full({2}, static_cast<double>(r + 1)));
        CHECK(model->running.item<float>() == sums[it]);
        autograd::backward(autograd::sum(out));
        double sum = 0;
        for (int q = it; q < ws; ++q) sum += q + 1;
        CHECK(allclose(autograd::grad(model->w), full({2}, sum / ws)));
        model->zero_grad();
      }
    }
    CHECK(calls == ws);
    CHECK(model->running.item<float>() == sums.back());  // the last rank's buffers, broadcast at the end
  }
}

// throw_on_early_termination (PyTorch's join(throw_on_early_termination=True)): rank r has r + 1 inputs.
// Rank 0 runs out first; at the next forward of the others every rank raises, none shadows or hangs, and
// afterwards the group is still in step: a plain DDP step averages over every rank.
TEST_CASE_METHOD(MpFixture, "ddp join: throw_on_early_termination raises on every rank", "[ddp][join]") {
  const int r = rank(), ws = size();
  auto model = std::make_shared<Scale>();
  DDPOptions o;
  o.process_group = shared_group();
  DistributedDataParallel ddp(model, o);
  int trained = 0;
  const auto train = [&](int inputs) {
    auto join = ddp.join(/*divide_by_initial_world_size=*/true, /*enable=*/true, /*throw_on_early_termination=*/true);
    for (int it = 0; it < inputs; ++it) {
      autograd::backward(autograd::sum(ddp.forward(full({2}, static_cast<double>(r + 1)))));
      ++trained;
      model->zero_grad();
    }
  };
  SECTION("uneven inputs") {
    if (r == 0) {
      CHECK_THROWS_WITH(train(r + 1), Catch::Contains("Rank 0 exhausted all inputs."));
    } else {
      CHECK_THROWS_WITH(train(r + 1), Catch::Contains("Detected at least one rank that exhausted inputs. Throwing "
                                                      "across all ranks."));
    }
    // Everyone finished the first iteration and none the second.
    CHECK(trained == 1);
    CHECK(ddp.logging_data().iteration == 1);
  }
  SECTION("even inputs: no error") {
    CHECK_NOTHROW(train(2));
    CHECK(trained == 2);
  }
  // Nothing left pending: an ordinary step still averages over the whole group.
  autograd::backward(autograd::sum(ddp.forward(full({2}, static_cast<double>(r + 1)))));
  CHECK(allclose(autograd::grad(model->w), full({2}, (ws + 1) / 2.0)));
}
