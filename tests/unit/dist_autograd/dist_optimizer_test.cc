// DistributedOptimizer in a job of one worker: option encoding, the checks made at construction, and
// steps from a distributed-autograd context's gradients over a RemoteModule's parameters and a local
// parameter wrapped in an RRef, against values computed by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "base/error.h"
#include "dist_autograd/context.h"
#include "dist_autograd/dist_optimizer.h"
#include "dist_autograd/hosted_module.h"
#include "dist_autograd/remote_module.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/unit/dist_autograd/solo_rpc.h"

namespace braid::dist_autograd {

using rpc::Value;

namespace {

Tensor mat(std::vector<float> values, Shape shape) { return from_vector(values, shape); }

nn::optim::SGDOptions sgd(double lr) {
  nn::optim::SGDOptions o;
  o.lr = lr;
  return o;
}

}  // namespace

TEST_CASE("DistributedOptimizer: options survive encoding; unknown kinds and fields fail", "[dist_optimizer]") {
  nn::optim::SGDOptions s = sgd(0.5);
  s.momentum = 0.9;
  s.nesterov = true;
  const auto back = std::get<nn::optim::SGDOptions>(decode_optimizer_options(encode_optimizer_options(s)));
  CHECK(back.lr == 0.5);
  CHECK(back.momentum == 0.9);
  CHECK(back.nesterov);
  CHECK_FALSE(back.maximize);

  nn::optim::AdamWOptions w;
  w.beta2 = 0.5;
  w.amsgrad = true;
  const OptimizerOptions decoded = decode_optimizer_options(encode_optimizer_options(w));
  REQUIRE(std::holds_alternative<nn::optim::AdamWOptions>(decoded));
  CHECK(std::get<nn::optim::AdamWOptions>(decoded).beta2 == 0.5);
  CHECK(std::get<nn::optim::AdamWOptions>(decoded).amsgrad);
  CHECK(std::get<nn::optim::AdamWOptions>(decoded).weight_decay == 1e-2);
  CHECK(optimizer_kind(nn::optim::AdamOptions{}) == "Adam");

  rpc::Dict bad_kind;
  bad_kind.set("kind", Value("RMSprop"));
  CHECK_THROWS_WITH(decode_optimizer_options(Value(bad_kind)), Catch::Contains("unknown optimizer kind 'RMSprop'"));
  rpc::Dict bad_field;
  bad_field.set("kind", Value("SGD"));
  bad_field.set("betas", Value(0.9));
  CHECK_THROWS_WITH(decode_optimizer_options(Value(bad_field)), Catch::Contains("SGD has no option 'betas'"));
  rpc::Dict bad_type;
  bad_type.set("kind", Value("Adam"));
  bad_type.set("amsgrad", Value("yes"));
  CHECK_THROWS_WITH(decode_optimizer_options(Value(bad_type)), Catch::Contains("Adam option 'amsgrad'"));
}

TEST_CASE("DistributedOptimizer: construction checks the list, the options and what the RRefs hold",
          "[dist_optimizer]") {
  testing::SoloRpc job;
  RemoteModule layer("worker0/cpu", "nn.Linear", {Value(int64_t{2}), Value(int64_t{3})});
  const std::vector<rpc::RRef> params = layer.remote_parameters();

  CHECK_THROWS_WITH(DistributedOptimizer(sgd(0.1), {}), Catch::Contains("the parameter list is empty"));
  CHECK_THROWS_WITH(DistributedOptimizer(sgd(0.1), {params[0], rpc::RRef()}),
                    Catch::Contains("parameter RRef 1 is null"));
  CHECK_THROWS_AS(DistributedOptimizer(nn::optim::SGDOptions{}, params), InvalidArgument);  // lr is required
  nn::optim::AdamOptions bad_betas;
  bad_betas.beta1 = 1.5;
  CHECK_THROWS_AS(DistributedOptimizer(bad_betas, params), InvalidArgument);

  // Failures on the owner name it.
  CHECK_THROWS_WITH(DistributedOptimizer(sgd(0.1), {rpc::RRef::local(Value(int64_t{3}))}),
                    Catch::Contains("error on remote worker 'worker0': DistributedOptimizer: creating the SGD "
                                    "optimizer failed: ") &&
                        Catch::Contains("parameter RRef 0 (RRef(owner=worker0") &&
                        Catch::Contains("holds int 3, not a tensor"));
  try {
    DistributedOptimizer(sgd(0.1), {params[0], params[1], params[0]});
    FAIL("the same parameter twice was accepted");
  } catch (const RemoteError& e) {
    CHECK(e.worker() == "worker0");
    CHECK_THAT(e.remote_message(), Catch::Contains("appears more than once in the parameter list"));
  }

  DistributedOptimizer opt(sgd(0.1), params);
  REQUIRE(opt.owners().size() == 1);
  CHECK(opt.owners()[0].name == "worker0");
  CHECK(opt.remote_optimizers().size() == 1);
  CHECK(opt.remote_optimizers()[0].rpc_sync().call("num_params", {}).as_int() == 2);
}

TEST_CASE("DistributedOptimizer: step with an unknown context fails naming the worker", "[dist_optimizer]") {
  testing::SoloRpc job;
  RemoteModule layer("worker0/cpu", "nn.Linear", {Value(int64_t{2}), Value(int64_t{3})});
  DistributedOptimizer opt(sgd(0.1), layer.remote_parameters());
  const Tensor before = layer.remote_parameters()[0].to_here().as_tensor().clone();
  try {
    opt.step(424242);
    FAIL("step with an unknown context succeeded");
  } catch (const RemoteError& e) {
    CHECK(e.worker() == "worker0");
    CHECK_THAT(e.remote_message(), Catch::Contains("DistributedOptimizer.step(context_id=424242) failed: ") &&
                                       Catch::Contains("Could not find autograd context with id: 424242"));
  }
  CHECK(equal(layer.remote_parameters()[0].to_here().as_tensor(), before));
}

// Needs the distributed-autograd core (Context, backward, get_gradients).
TEST_CASE("DistributedOptimizer: SGD steps remote and local parameters by -lr * their context gradient",
          "[dist_optimizer][core]") {
  testing::SoloRpc job;
  // Remote layer y = x W^T + b (on worker0, this process), then a local z = y v^T; loss = sum(z).
  RemoteModule remote_layer("worker0/cpu", "nn.Linear", {Value(int64_t{2}), Value(int64_t{3})});
  {
    const auto m = local_module(remote_layer.module_rref());
    autograd::NoGradGuard no_grad;
    m->parameter("weight").copy_(mat({1, 2, 3, 4, 5, 6}, {3, 2}));
    m->parameter("bias").copy_(mat({0.5f, -1, 2}, {3}));
  }
  Tensor v = mat({1, 2, 3}, {1, 3});
  autograd::set_requires_grad(v, true);
  std::vector<rpc::RRef> params = remote_layer.remote_parameters();
  params.push_back(rpc::RRef::local(Value(v)));
  DistributedOptimizer opt(sgd(0.25), params);
  const Tensor x = mat({1, -1, 2, 0.5f}, {2, 2});

  {
    Context ctx;
    const Tensor y = remote_layer(x);                       // [[-0.5, -2, 1], [3.5, 7, 15]]
    const Tensor loss = autograd::sum(autograd::linear(y, v, Tensor()));
    backward(ctx.id(), {loss});
    const GradientMap grads = get_gradients(ctx.id());
    const auto m = local_module(remote_layer.module_rref());
    // dL/dy[b][o] = v[o]: dW[o] = v[o] * (sum of x's rows), db[o] = 2 v[o], dv = sum of y's rows.
    CHECK(equal(grads.at(m->parameter("weight")), mat({3, -0.5f, 6, -1, 9, -1.5f}, {3, 2})));
    CHECK(equal(grads.at(m->parameter("bias")), mat({2, 4, 6}, {3})));
    CHECK(equal(grads.at(v), mat({3, 5, 16}, {1, 3})));
    CHECK_FALSE(autograd::grad(v).defined());  // a distributed backward leaves .grad alone

    opt.step(ctx.id());
  }
  // p - 0.25 * g, exact in float32.
  CHECK(equal(params[0].to_here().as_tensor(), mat({0.25f, 2.125f, 1.5f, 4.25f, 2.75f, 6.375f}, {3, 2})));
  CHECK(equal(params[1].to_here().as_tensor(), mat({0, -2, 0.5f}, {3})));
  CHECK(equal(v, mat({0.25f, 0.75f, -1}, {1, 3})));
  // The module sees the update: its forward uses the new weights.
  CHECK(equal(remote_layer(mat({1, 0}, {1, 2})), mat({0.25f, -0.5f, 3.25f}, {1, 3})));
}

// Needs the distributed-autograd core.
TEST_CASE("DistributedOptimizer: Adam over a context's gradients matches a local Adam over the same gradients",
          "[dist_optimizer][core]") {
  testing::SoloRpc job;
  RemoteModule remote_layer("worker0/cpu", "nn.Linear", {Value(int64_t{2}), Value(int64_t{3})});
  const auto m = local_module(remote_layer.module_rref());
  const nn::StateDict start = state_dict_of(remote_layer.module_rref().to_here());
  nn::optim::AdamOptions options;
  options.lr = 0.1;
  DistributedOptimizer opt(options, remote_layer.remote_parameters());

  // The reference: the same updates by a local Adam on copies, from the gradients the context held.
  nn::TensorList copies;
  for (const auto& [name, t] : start) {
    copies.push_back(t.clone());
    autograd::set_requires_grad(copies.back(), true);
  }
  nn::optim::Adam reference(copies, options);
  const Tensor x = mat({1, -1, 2, 0.5f}, {2, 2});
  for (int round = 0; round < 3; ++round) {
    Context ctx;
    backward(ctx.id(), {autograd::sum(remote_layer(x))});
    const GradientMap grads = get_gradients(ctx.id());
    reference.step_with({{copies[0], grads.at(m->parameter("weight"))}, {copies[1], grads.at(m->parameter("bias"))}});
    opt.step(ctx.id());
  }
  CHECK(equal(m->parameter("weight"), copies[0]));
  CHECK(equal(m->parameter("bias"), copies[1]));
  CHECK_FALSE(equal(m->parameter("weight"), start[0].second));
}

}  // namespace braid::dist_autograd

namespace braid::dist_autograd {

// Needs the distributed-autograd core (Context, backward, get_gradients).
TEST_CASE("DistributedOptimizer: the owners' optimizer state goes out and comes back through state_dict",
          "[dist_optimizer][core]") {
  testing::SoloRpc job;
  RemoteModule layer("worker0/cpu", "nn.Linear", {Value(int64_t{2}), Value(int64_t{1})});
  nn::optim::SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  DistributedOptimizer opt(o, layer.remote_parameters());
  REQUIRE(opt.remote_optimizers().size() == 1);
  const rpc::RRef& remote = opt.remote_optimizers()[0];
  CHECK(remote.rpc_sync().call("state_dict", {}).as_dict().find("state.0.momentum_buffer") == nullptr);
  {
    Context ctx;
    const Tensor y = layer.forward(from_vector<float>({1, 2}, {1, 2}));
    backward(ctx.id(), {autograd::sum(y)});
    opt.step(ctx.id());
  }
  const Value saved = remote.rpc_sync().call("state_dict", {});
  const Value* buffer = saved.as_dict().find("state.0.momentum_buffer");
  REQUIRE(buffer != nullptr);
  CHECK(equal(buffer->as_tensor(), from_vector<float>({1, 2}, {1, 2})));  // the first step's gradient
  // Loading a changed buffer replaces the state; a malformed key is refused, naming it.
  rpc::Dict changed = saved.as_dict();
  changed.set("state.0.momentum_buffer", Value(from_vector<float>({5, 6}, {1, 2})));
  remote.rpc_sync().call("load_state_dict", {Value(changed)});
  const Value reloaded = remote.rpc_sync().call("state_dict", {});
  CHECK(equal(reloaded.as_dict().find("state.0.momentum_buffer")->as_tensor(), from_vector<float>({5, 6}, {1, 2})));
  rpc::Dict bad;
  bad.set("nonsense", Value(from_vector<float>({1}, {1})));
  CHECK_THROWS_WITH(remote.rpc_sync().call("load_state_dict", {Value(bad)}), Catch::Contains("nonsense"));
}

}  // namespace braid::dist_autograd
