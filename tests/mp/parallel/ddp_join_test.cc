// DDP join (SPEC C.11): rank r trains r + 1 iterations; the ranks that finish early shadow the others.
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
