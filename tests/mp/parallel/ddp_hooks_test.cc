// DDP's comm-hook protocol (register_comm_hook, torch's test_c10d_gloo.py hook tests) and the Reducer's
// construction checks (torch's ReducerTest):
// the value a hook's future carries becomes the gradient, a hook registers once, a hook that returns a
// tensor unlike the bucket fails the backward, is_last() marks only the last bucket, and a bucket may not
// mix dtypes.
#include "autograd/engine.h"
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
using parallel::GradBucket;
using parallel::NamedCommHook;
using parallel::Reducer;

namespace {

Future<Tensor> ready(Tensor t) {
  Future<Tensor> f("test hook");
  f.set_value(std::move(t));
  return f;
}

// torch's ModuleForDdpCommHook (test_c10d_common.py): forward(x) = t0(x + rank).
class HookModule : public nn::Module {
 public:
  explicit HookModule(int rank) : nn::Module("ModuleForDdpCommHook"), rank_(rank) {
    t0 = register_module("t0", std::make_shared<Task>());
  }
  Tensor forward(const Tensor& x) override { return t0->forward(autograd::add(x, static_cast<double>(rank_))); }
  std::shared_ptr<Task> t0;

 private:
  int rank_;
};

}  // namespace

TEST_CASE_METHOD(MpFixture, "ddp hooks: the hook's future value becomes the gradient (future passing)", "[ddp][hook]") {
  auto model = std::make_shared<HookModule>(rank());
  DDPOptions o;
  o.process_group = shared_group();
  DistributedDataParallel ddp(model, o);
  ddp.register_comm_hook(NamedCommHook{"ones plus one", [](GradBucket& b) {
                                         return ready(ones_like(b.buffer()))
                                             .then([](const Tensor& t) { return add(t, 1.0); }, "plus one");
                                       }});
  autograd::backward(autograd::mean(ddp.forward(full({2, 2}, 8.0))));
  CHECK(equal(autograd::grad(model->t0->p), full({2, 2}, 2.0)));
  CHECK(ddp.logging_data().comm_hook == "ones plus one");
  CHECK_THROWS_WITH(ddp.register_comm_hook(NamedCommHook{"again", [](GradBucket& b) { return ready(b.buffer()); }}),
                    Catch::Contains("register_comm_hook or register_builtin_comm_hook can only be called once."));
  CHECK(ddp.logging_data().has_error);
}

TEST_CASE_METHOD(MpFixture, "ddp hooks: a result unlike the bucket fails the backward, naming the bucket",
                 "[ddp][hook]") {
  auto model = std::make_shared<HookModule>(rank());
  DDPOptions o;
  o.process_group = shared_group();
  DistributedDataParallel ddp(model, o);
  ddp.register_comm_hook(NamedCommHook{"wrong shape", [](GradBucket&) { return ready(ones({3})); }});
  CHECK_THROWS_WITH(autograd::backward(autograd::mean(ddp.forward(ones({2, 2})))),
                    Catch::Contains("comm hook's result for bucket 0"));
  CHECK_THROWS_WITH(ddp.register_comm_hook(NamedCommHook{"null", nullptr}),
                    Catch::Contains("Communication hook must be callable."));
}

TEST_CASE_METHOD(MpFixture, "ddp hooks: is_last() is true only for the last bucket, indices in order", "[ddp][hook]") {
  auto model = std::make_shared<ParityNet>(11);
  const auto params = model->parameters();
  auto reducer = Reducer::create(params, {"fc1.weight", "fc2.weight", "fc3.weight"}, {{2}, {1}, {0}}, shared_group(),
                                 {}, {});
  auto seen = std::make_shared<std::vector<std::pair<size_t, bool>>>();
  auto pg = shared_group();
  reducer->register_comm_hook(NamedCommHook{"record", [seen, pg](GradBucket& b) {
                                              seen->emplace_back(b.index(), b.is_last());
                                              collectives::TensorList l{b.buffer()};
                                              return pg->allreduce(l)->get_future().then(
                                                  [](const collectives::TensorList& out) { return out[0]; }, "sum");
                                            }});
  reducer->prepare_for_forward();
  const Tensor out = model->forward(ones({2, 2}));
  reducer->prepare_for_backward({out});
  autograd::backward(autograd::sum(out));
  CHECK(*seen == std::vector<std::pair<size_t, bool>>{{0, false}, {1, false}, {2, true}});
  CHECK(reducer->stats().iteration == 1);
  CHECK(reducer->stats().bucket_launch_ms.size() == 3);
}

TEST_CASE_METHOD(MpFixture, "ddp reducer: a bucket may not mix dtypes; grouped by dtype it constructs",
                 "[ddp][reducer]") {
  auto model = std::make_shared<ParityNet>(11);
  model->fc1->to(DType::Float64);
  const auto params = model->parameters();
  CHECK_THROWS_WITH(Reducer::create(params, {"fc1.weight", "fc2.weight", "fc3.weight"}, {{0, 1, 2}}, shared_group(), {}, {}),
                    Catch::Contains("bucket 0 mixes dtypes") && Catch::Contains("float64") &&
                        Catch::Contains("float32"));
  CHECK_NOTHROW(Reducer::create(params, {}, {{0}, {1, 2}}, shared_group(), {}, {}));
  CHECK_THROWS_WITH(Reducer::create(params, {}, {{0}, {1}}, shared_group(), {}, {}), Catch::Contains("in no bucket"));
}

TEST_CASE_METHOD(MpFixture, "ddp: construction checks the model is the same on every rank", "[ddp]") {
  if (size() < 2) return;
  // Rank 1's model has a wider fc1: every rank learns about it, naming the parameter.
  struct Model : nn::Module {
    explicit Model(int64_t width) : nn::Module("M") {
      fc = register_module("fc", std::make_shared<nn::Linear>(2, width, false));
    }
    Tensor forward(const Tensor& x) override { return fc->forward(x); }
    std::shared_ptr<nn::Linear> fc;
  };
  auto model = std::make_shared<Model>(rank() == 1 ? 5 : 4);
  DDPOptions o;
  o.process_group = shared_group();
  CHECK_THROWS_WITH(DistributedDataParallel(model, o),
                    Catch::Contains("fc.weight") && Catch::Contains("on rank 1 is float32 [5, 2]") &&
                        Catch::Contains("appears not to match sizes of the same param in process 0 (float32 [4, 2])"));
  o.device_ids = {Device::cpu(), Device::cpu()};
  CHECK_THROWS_WITH(DistributedDataParallel(model, o), Catch::Contains("device_ids can only be None or contain a single element."));
}

TEST_CASE_METHOD(MpFixture, "ddp: parameters and buffers start as rank 0's; buffers follow rank 0 each forward",
                 "[ddp]") {
  struct WithBuffer : nn::Module {
    explicit WithBuffer(int rank) : nn::Module("B") {
      w = register_parameter("w", full({2}, static_cast<double>(rank + 1)));
      b = register_buffer("b", full({2}, static_cast<double>(10 * (rank + 1))));
    }
    Tensor forward(const Tensor& x) override { return autograd::mul(w, x); }
    Tensor w, b;
  };
  auto model = std::make_shared<WithBuffer>(rank());
  DDPOptions o;
  o.process_group = shared_group();
  DistributedDataParallel ddp(model, o);
  CHECK(equal(model->w, full({2}, 1.0)));
  CHECK(equal(model->b, full({2}, 10.0)));
  model->b.fill_(static_cast<double>(rank() == 0 ? 7 : 99));
  (void)ddp.forward(ones({2}));
  CHECK(equal(model->b, full({2}, 7.0)));
  // Ignored buffers are left alone.
  auto other = std::make_shared<WithBuffer>(rank());
  o.params_and_buffers_to_ignore = {".b"};
  DistributedDataParallel ignoring(other, o);
  CHECK(equal(other->b, full({2}, 10.0 * (rank() + 1))));
}
