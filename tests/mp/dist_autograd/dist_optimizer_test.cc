// DistributedOptimizer across processes (needs the distributed-autograd core): every rank trains a
// RemoteModule on the next rank's worker together with a local parameter; the owners' weights move by
// exactly -lr times their context gradients, which are checked against values computed by hand.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "base/error.h"
#include "dist_autograd/context.h"
#include "dist_autograd/dist_optimizer.h"
#include "dist_autograd/remote_module.h"
#include "rpc/api.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/mp/dist_autograd/remote_module_mp.h"
#include "tests/mp/rpc/rpc_mp.h"

namespace braid::mp {

using dist_autograd::DistributedOptimizer;
using dist_autograd::RemoteModule;
using rpc::Value;

namespace {

nn::optim::SGDOptions sgd(double lr) {
  nn::optim::SGDOptions o;
  o.lr = lr;
  return o;
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "DistributedOptimizer: SGD moves remote and local parameters by -lr * context gradient",
                 "[dist_optimizer][core]") {
  register_remote_module_test_classes();
  RpcJob job(*this);
  const std::string owner = worker_name((rank() + 1) % size());
  // y = x W^T + b on the owner, then z = y v^T here; loss = sum(z).
  RemoteModule remote_layer(owner + "/cpu", "rm.FixedLinear", {Value(known_w()), Value(known_b())});
  Tensor v = mat({1, 2, 3}, {1, 3});
  autograd::set_requires_grad(v, true);
  std::vector<rpc::RRef> params = remote_layer.remote_parameters();
  params.push_back(rpc::RRef::local(Value(v)));
  DistributedOptimizer opt(sgd(0.25), params);
  REQUIRE(opt.owners().size() == 2);
  CHECK(opt.owners()[0].name == owner);
  CHECK(opt.owners()[1].name == worker_name(rank()));

  {
    dist_autograd::Context ctx;
    const Tensor y = remote_layer(known_x());
    CHECK(equal(y, known_y()));
    const Tensor loss = autograd::sum(autograd::linear(y, v, Tensor()));
    dist_autograd::backward(ctx.id(), {loss});

    // dL/dy[b][o] = v[o]: dW[o] = v[o] * (sum of x's rows) = v[o] * [3, -0.5], db[o] = 2 v[o]; dv = sum of
    // y's rows.
    const Value remote_grads = rpc::rpc_sync(owner, "rm.context_grads", {Value(remote_layer.module_rref()), Value(ctx.id())});
    REQUIRE(remote_grads.as_list().size() == 2);
    CHECK(equal(remote_grads.as_list()[0].as_tensor(), mat({3, -0.5f, 6, -1, 9, -1.5f}, {3, 2})));
    CHECK(equal(remote_grads.as_list()[1].as_tensor(), mat({2, 4, 6}, {3})));
    const dist_autograd::GradientMap local_grads = dist_autograd::get_gradients(ctx.id());
    CHECK(equal(local_grads.at(v), mat({3, 5, 16}, {1, 3})));
    CHECK_FALSE(autograd::grad(v).defined());

    opt.step(ctx.id());
  }
  // p - 0.25 * g, exact in float32, on the owner (read through the parameter RRefs) and here.
  CHECK(equal(params[0].to_here().as_tensor(), mat({0.25f, 2.125f, 1.5f, 4.25f, 2.75f, 6.375f}, {3, 2})));
  CHECK(equal(params[1].to_here().as_tensor(), mat({0, -2, 0.5f}, {3})));
  CHECK(equal(v, mat({0.25f, 0.75f, -1}, {1, 3})));
  // The owner's module runs with the new weights.
  CHECK(equal(remote_layer(mat({1, 0}, {1, 2})), mat({0.25f, -0.5f, 3.25f}, {1, 3})));
  job.shutdown(true);
}

TEST_CASE_METHOD(MpFixture, "DistributedOptimizer: two rounds of SGD with momentum keep each owner's state",
                 "[dist_optimizer][core]") {
  register_remote_module_test_classes();
  RpcJob job(*this);
  const std::string owner = worker_name((rank() + 1) % size());
  RemoteModule remote_layer(owner, "rm.FixedLinear", {Value(known_w()), Value()});
  nn::optim::SGDOptions o = sgd(0.5);
  o.momentum = 0.5;
  const std::vector<rpc::RRef> params = remote_layer.remote_parameters();
  REQUIRE(params.size() == 1);
  DistributedOptimizer opt(o, params);
  // loss = sum(x W^T): dW[o] = sum of x's rows = [3, -0.5] every round. Momentum buffer: g, then
  // 0.5 g + g = 1.5 g. W1 = W - 0.5 g; W2 = W1 - 0.75 g = W - 1.25 g.
  for (int round = 0; round < 2; ++round) {
    dist_autograd::Context ctx;
    dist_autograd::backward(ctx.id(), {autograd::sum(remote_layer(known_x()))});
    opt.step(ctx.id());
  }
  CHECK(equal(params[0].to_here().as_tensor(), mat({1 - 3.75f, 2.625f, 3 - 3.75f, 4.625f, 5 - 3.75f, 6.625f}, {3, 2})));
  job.shutdown(true);
}

TEST_CASE_METHOD(MpFixture, "DistributedOptimizer: parameters without a gradient in the context stay as they are",
                 "[dist_optimizer][core]") {
  register_remote_module_test_classes();
  RpcJob job(*this);
  const std::string owner = worker_name((rank() + 1) % size());
  RemoteModule unused(owner, "rm.FixedLinear", {Value(known_w()), Value(known_b())});
  Tensor v = mat({1, 2, 3}, {1, 3});
  autograd::set_requires_grad(v, true);
  std::vector<rpc::RRef> params = unused.remote_parameters();
  params.push_back(rpc::RRef::local(Value(v)));
  DistributedOptimizer opt(sgd(0.5), params);
  {
    // Only the local parameter takes part: loss = sum(v * 2) -> dv = 2.
    dist_autograd::Context ctx;
    dist_autograd::backward(ctx.id(), {autograd::sum(autograd::mul(v, mat({2, 2, 2}, {1, 3})))});
    opt.step(ctx.id());
  }
  CHECK(equal(v, mat({0, 1, 2}, {1, 3})));
  CHECK(equal(params[0].to_here().as_tensor(), known_w()));
  CHECK(equal(params[1].to_here().as_tensor(), known_b()));
  job.shutdown(true);
}

TEST_CASE_METHOD(MpFixture, "DistributedOptimizer: a step with a released context fails naming the owner",
                 "[dist_optimizer][core]") {
  register_remote_module_test_classes();
  RpcJob job(*this);
  const std::string owner = worker_name((rank() + 1) % size());
  RemoteModule remote_layer(owner, "rm.FixedLinear", {Value(known_w()), Value(known_b())});
  DistributedOptimizer opt(sgd(0.25), remote_layer.remote_parameters());
  int64_t released = -1;
  {
    dist_autograd::Context ctx;
    dist_autograd::backward(ctx.id(), {autograd::sum(remote_layer(known_x()))});
    released = ctx.id();
  }
  // Leaving the context does not wait for the owner's release; a step must not overtake it here.
  dist_autograd::wait_for_releases(std::chrono::milliseconds(10'000));
  try {
    opt.step(released);
    FAIL("a step with a released context succeeded");
  } catch (const RemoteError& e) {
    CHECK(e.worker() == owner);
    CHECK_THAT(e.remote_message(), Catch::Contains("Could not find autograd context with id: " + std::to_string(released)));
  }
  // Nothing moved.
  CHECK(equal(remote_layer.remote_parameters()[0].to_here().as_tensor(), known_w()));
  job.shutdown(true);
}

}  // namespace braid::mp
