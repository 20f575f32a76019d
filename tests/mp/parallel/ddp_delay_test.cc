// delay_all_reduce_named_params (PyTorch's _delay_all_reduce_params): the delayed parameters leave the
// buckets and are all-reduced once, at the end of backward, from one flat buffer their .grad views live
// in. Parity with plain DDP over three SGD steps, with part or all of the parameters delayed (also with
// find_unused_parameters, whose graph search walks through the sink node); the
// interplay with params_and_buffers_to_ignore; no_sync; param_to_hook_all_reduce (parity, the launch
// inside the backward pass, the error for a delayed gradient after the launch); the argument errors.
#include <algorithm>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/shape.h"
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


std::vector<std::pair<std::string, Tensor>> named(const nn::Module& m, const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [n, p] : m.named_parameters()) {
    if (std::find(names.begin(), names.end(), n) != names.end()) out.emplace_back(n, p);
  }
  return out;
}

// Trains a plain DDP and one with `delayed` (and `ignored`) on the same rank-local batches; a third copy
// without DDP gives the local gradients the ignored-only parameters must keep.
void check_against_plain(MpFixture& f, const std::vector<std::string>& delayed,
                         const std::vector<std::string>& ignored = {}, bool find_unused = false,
                         const std::string& hook_param = {}) {
  const int ws = f.size(), r = f.rank();
  auto plain_model = std::make_shared<ParityNet>(7);
  auto delay_model = std::make_shared<ParityNet>(7);
  auto local_model = std::make_shared<ParityNet>(7);
  DDPOptions plain_o;
  plain_o.process_group = f.shared_group();
  plain_o.bucket_cap_mb = 0.001;
  plain_o.find_unused_parameters = find_unused;  // the graph search walks through the sink
  DDPOptions delay_o = plain_o;
  delay_o.delay_all_reduce_named_params = named(*delay_model, delayed);
  delay_o.params_and_buffers_to_ignore = ignored;
  if (!hook_param.empty()) delay_o.param_to_hook_all_reduce = named(*delay_model, {hook_param}).at(0).second;
  DistributedDataParallel plain(plain_model, plain_o);
  DistributedDataParallel delay(delay_model, delay_o);
  REQUIRE(delay.delayed_allreduce() != nullptr);
  for (int it = 0; it < 3; ++it) {
    INFO("iteration " << it);
    Generator gen(4242 + static_cast<uint64_t>(it));
    const Tensor all_input = rand({ws * 2, 2}, {}, &gen);
    const Tensor all_target = rand({ws * 2, 4}, {}, &gen);
    const Tensor x = all_input.slice(0, r * 2, (r + 1) * 2);
    const Tensor y = all_target.slice(0, r * 2, (r + 1) * 2);
    autograd::backward(autograd::mse_loss(plain.forward(x), y));
    autograd::backward(autograd::mse_loss(delay.forward(x), y));
    autograd::backward(autograd::mse_loss(local_model->forward(x), y));
    const auto pp = plain_model->named_parameters();
    const auto dp = delay_model->named_parameters();
    const auto lp = local_model->named_parameters();
    for (size_t i = 0; i < pp.size(); ++i) {
      const std::string& name = pp[i].first;
      INFO(name);
      const Tensor g = autograd::grad(dp[i].second);
      REQUIRE(g.defined());
      const bool is_delayed = std::count(delayed.begin(), delayed.end(), name) > 0;
      const bool is_ignored = std::count(ignored.begin(), ignored.end(), name) > 0;
      // A parameter in both lists is still delayed, hence averaged (PyTorch's semantics).
      const Tensor expected = is_ignored && !is_delayed ? autograd::grad(lp[i].second) : autograd::grad(pp[i].second);
      CHECK(allclose(g, expected, 1e-5, 1e-7));
      // The delayed gradients live in the one flat buffer.
      CHECK(g.shares_storage_with(delay.delayed_allreduce()->buffer()) == is_delayed);
    }
    sgd_step(*plain_model);
    sgd_step(*delay_model);
    // The ignored-only parameters were updated with local gradients and so diverge by design: put the
    // plain model's values back, so that the next forwards agree; the local copy follows the delayed one.
    {
      autograd::NoGradGuard no_grad;
      for (size_t i = 0; i < dp.size(); ++i) {
        const std::string& name = pp[i].first;
        const bool ignored_only = std::count(ignored.begin(), ignored.end(), name) > 0 &&
                                  std::count(delayed.begin(), delayed.end(), name) == 0;
        if (ignored_only) dp[i].second.copy_(pp[i].second);
        lp[i].second.copy_(dp[i].second);
      }
    }
    local_model->zero_grad();
    for (size_t i = 0; i < pp.size(); ++i) CHECK(allclose(dp[i].second, pp[i].second, 1.3e-6, 5e-5));
  }
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "ddp delay_all_reduce_named_params: gradients equal plain DDP", "[ddp][delay]") {
  SECTION("two of three parameters delayed") {
    check_against_plain(*this, {"fc1.weight", "fc3.weight"});
  }
  SECTION("every parameter delayed: no Reducer") {
    check_against_plain(*this, {"fc1.weight", "fc2.weight", "fc3.weight"});
  }
  SECTION("with find_unused_parameters") {
    check_against_plain(*this, {"fc2.weight"}, {}, /*find_unused=*/true);
  }
  SECTION("with params_and_buffers_to_ignore: a delayed parameter is reduced even when ignored") {
    check_against_plain(*this, {"fc1.weight"}, {"fc1.weight", "fc2.weight"});
  }
  SECTION("param_to_hook_all_reduce: started once the first layer's gradient is in") {
    check_against_plain(*this, {"fc2.weight", "fc3.weight"}, {}, false, "fc1.weight");
  }
  SECTION("param_to_hook_all_reduce on a delayed parameter itself") {
    check_against_plain(*this, {"fc1.weight", "fc3.weight"}, {}, false, "fc1.weight");
  }
}

TEST_CASE_METHOD(MpFixture, "ddp param_to_hook_all_reduce: the allreduce starts before backward ends",
                 "[ddp][delay]") {
  // Every parameter is delayed (no Reducer, so no bucket collectives), and the hooked one's gradient is the
  // last computed: the delayed allreduce is issued from inside the backward pass, by the time the hooked
  // parameter's other post-accumulate hooks run, not by the end-of-pass callback.
  auto model = std::make_shared<ParityNet>(7);
  DDPOptions o;
  o.process_group = shared_group();
  o.delay_all_reduce_named_params = named(*model, {"fc1.weight", "fc2.weight", "fc3.weight"});
  o.param_to_hook_all_reduce = model->fc1->weight();
  DistributedDataParallel ddp(model, o);
  uint64_t seq_at_fc1 = 0;
  autograd::register_post_accumulate_grad_hook(model->fc1->weight(), [&](const Tensor&, const Tensor&) {
    seq_at_fc1 = o.process_group->sequence_number();  // after DDP's own hook (registered first) ran
  });
  const uint64_t before = o.process_group->sequence_number();
  Generator gen(5);
  autograd::backward(autograd::sum(ddp.forward(rand({2, 2}, {}, &gen))));
  CHECK(seq_at_fc1 > before);  // the delayed allreduce was issued by then
}

TEST_CASE_METHOD(MpFixture, "ddp param_to_hook_all_reduce: a delayed gradient after the launch is an error",
                 "[ddp][delay]") {
  // fc3's gradient is computed first: hooking it starts the allreduce before fc1's delayed gradient exists.
  auto model = std::make_shared<ParityNet>(7);
  DDPOptions o;
  o.process_group = shared_group();
  o.delay_all_reduce_named_params = named(*model, {"fc1.weight"});
  o.param_to_hook_all_reduce = model->fc3->weight();
  DistributedDataParallel ddp(model, o);
  Generator gen(5);
  CHECK_THROWS_WITH(autograd::backward(autograd::sum(ddp.forward(rand({2, 2}, {}, &gen)))),
                    Catch::Contains("the gradient of fc1.weight was accumulated after the allreduce that "
                                    "param_to_hook_all_reduce (fc3.weight) started"));
}

// The launch takes the delayed parameters without a gradient yet off the buffer (a late gradient must not
// be added into it while the engine works on it); one that gets none in the pass has its reduced view
// back as .grad when backward returns: zeros here, on every rank, in the same buffer as the others.
TEST_CASE_METHOD(MpFixture, "ddp param_to_hook_all_reduce: a delayed parameter unused in the pass keeps its view",
                 "[ddp][delay]") {
  auto model = std::make_shared<ParityNet>(7, /*with_unused=*/true);
  DDPOptions o;
  o.process_group = shared_group();
  o.find_unused_parameters = true;
  o.delay_all_reduce_named_params = named(*model, {"fc2.weight", "unused.weight"});
  o.param_to_hook_all_reduce = model->fc1->weight();
  DistributedDataParallel ddp(model, o);
  for (int it = 0; it < 2; ++it) {
    INFO("iteration " << it);
    Generator gen(9 + static_cast<uint64_t>(it));
    autograd::backward(autograd::sum(ddp.forward(rand({2, 2}, {}, &gen))));
    const Tensor g = autograd::grad(model->unused->weight());
    REQUIRE(g.defined());
    CHECK(g.shares_storage_with(ddp.delayed_allreduce()->buffer()));
    CHECK(equal(g, zeros(g.shape())));
    CHECK(autograd::grad(model->fc2->weight()).shares_storage_with(ddp.delayed_allreduce()->buffer()));
    model->zero_grad();
  }
}

TEST_CASE_METHOD(MpFixture, "ddp delay_all_reduce_named_params: buckets hold only the others", "[ddp][delay]") {
  auto model = std::make_shared<ParityNet>(7);
  DDPOptions o;
  o.process_group = shared_group();
  o.delay_all_reduce_named_params = named(*model, {"fc2.weight"});
  DistributedDataParallel ddp(model, o);
  size_t bucketed = 0;
  for (const auto& b : ddp.reducer().bucket_indices()) bucketed += b.size();
  CHECK(bucketed == 2);
  CHECK(ddp.managed_parameter_names() == std::vector<std::string>{"fc1.weight", "fc3.weight"});
}

TEST_CASE_METHOD(MpFixture, "ddp delay_all_reduce_named_params: no_sync sums locally, then reduces the sum",
                 "[ddp][delay]") {
  const int r = rank(), ws = size();
  auto model = std::make_shared<Task>();
  DDPOptions o;
  o.process_group = shared_group();
  o.delay_all_reduce_named_params = {{"p", model->p}};
  DistributedDataParallel ddp(model, o);
  CHECK_THROWS_WITH(ddp.reducer(), Catch::Contains("no Reducer"));
  CHECK_THROWS_WITH(ddp.join(), Catch::Contains("not supported with delay_all_reduce_named_params"));
  const Tensor x = full({2, 2}, static_cast<double>(r));
  {
    auto guard = ddp.no_sync();
    autograd::backward(autograd::sum(autograd::mul(ddp.forward(x), static_cast<double>(r + 1))));
  }
  CHECK(equal(autograd::grad(model->p), full({2, 2}, static_cast<double>(r + 1))));
  autograd::backward(autograd::sum(autograd::mul(ddp.forward(x), static_cast<double>(r + 1))));
  // The average over ranks of 2 (r + 1).
  CHECK(allclose(autograd::grad(model->p), full({2, 2}, static_cast<double>(ws + 1))));
  // zero_grad (to none) and a fresh step: the buffer starts from zero again.
  model->zero_grad();
  autograd::backward(autograd::sum(autograd::mul(ddp.forward(x), static_cast<double>(r + 1))));
  CHECK(allclose(autograd::grad(model->p), full({2, 2}, (ws + 1) / 2.0)));
}

TEST_CASE_METHOD(MpFixture, "ddp delay_all_reduce_named_params: argument errors", "[ddp][delay]") {
  struct TwoDtypes : nn::Module {
    TwoDtypes() : nn::Module("TwoDtypes") {
      a = register_parameter("a", ones({2}));
      b = register_parameter("b", ones({2}, TensorOptions(DType::Float64)));
    }
    Tensor forward(const Tensor& x) override {
      return autograd::add(autograd::mul(a, x), autograd::to(b, DType::Float32));
    }
    Tensor a, b;
  };
  auto model = std::make_shared<TwoDtypes>();
  DDPOptions o;
  o.process_group = shared_group();
  o.delay_all_reduce_named_params = {{"a", model->a}, {"b", model->b}};
  CHECK_THROWS_WITH(DistributedDataParallel(model, o),
                    Catch::Contains("must share one dtype and device") && Catch::Contains("float64"));
  o.delay_all_reduce_named_params = {{"stranger", ones({2})}};
  CHECK_THROWS_WITH(DistributedDataParallel(model, o), Catch::Contains("stranger is not a parameter of the module"));
  o.delay_all_reduce_named_params = {{"a", model->a}, {"a again", model->a}};
  CHECK_THROWS_WITH(DistributedDataParallel(model, o), Catch::Contains("is listed twice"));
  o.delay_all_reduce_named_params = {};
  o.param_to_hook_all_reduce = model->a;
  CHECK_THROWS_WITH(DistributedDataParallel(model, o),
                    Catch::Contains("param_to_hook_all_reduce is set but delay_all_reduce_named_params is empty"));
  o.delay_all_reduce_named_params = {{"a", model->a}};
  o.param_to_hook_all_reduce = ones({2});
  CHECK_THROWS_WITH(DistributedDataParallel(model, o), Catch::Contains("is not a parameter of the module"));
}
