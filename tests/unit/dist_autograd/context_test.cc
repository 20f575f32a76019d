// Distributed autograd in a job of one worker: every RPC goes to the worker itself, through the same
// send/recv recording and gradient propagation as between processes (tests/mp/dist_autograd/ covers
// those).
#include <catch2/catch.hpp>

#include <mutex>

#include "autograd/engine.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/op_helpers.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "dist_autograd/context.h"
#include "dist_autograd/context_state.h"
#include "rpc/api.h"
#include "store/hash_store.h"
#include "tensor/compare.h"
#include "tensor/factory.h"

namespace braid::dist_autograd {
namespace {

using rpc::Args;
using rpc::Value;

void register_functions() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = rpc::global_registry();
    r.add_function("da_unit.mul", [](const Args& a) -> Value {
      return autograd::mul(a.at(0).as_tensor(), a.at(1).as_tensor());
    });
    r.add_function("da_unit.linear", [](const Args& a) -> Value {
      return autograd::linear(a.at(0).as_tensor(), a.at(1).as_tensor(), a.at(2).as_tensor());
    });
    // A result whose backward throws: the error must reach the caller of backward.
    r.add_function("da_unit.bad_backward", [](const Args& a) -> Value {
      const Tensor& x = a.at(0).as_tensor();
      return autograd::detail::record("BadBackward", {x}, x.clone(), {},
                                      [](const autograd::TensorList&, autograd::SavedTensors&)
                                          -> autograd::TensorList { throw std::runtime_error("bad backward rule"); });
    });
  });
}

// One worker named worker0 over a private in-process store.
struct OneWorker {
  OneWorker() {
    register_functions();
    rpc::RpcBackendOptions o;
    o.store = std::make_shared<store::HashStore>();
    o.rpc_timeout = rpc::Millis(20'000);
    rpc::init_rpc("worker0", 0, 1, o);
  }
  ~OneWorker() { rpc::shutdown(true); }
  OneWorker(const OneWorker&) = delete;
  OneWorker& operator=(const OneWorker&) = delete;
};

Tensor leaf(std::vector<float> values, Shape shape) {
  Tensor t = from_vector(values, shape);
  autograd::set_requires_grad(t);
  return t;
}

TEST_CASE("dist_autograd: contexts have job-unique ids, nest not, and are released", "[dist_autograd]") {
  OneWorker job;
  CHECK(current_context_id() == -1);
  int64_t first = 0;
  {
    Context ctx;
    first = ctx.id();
    CHECK(current_context_id() == ctx.id());
    CHECK((ctx.id() >> 48) == 0);  // worker 0 in the high bits
    CHECK(has_context(ctx.id()));
    CHECK_THROWS_WITH(Context(), Catch::Contains("Already have an autograd context id for this thread"));
  }
  CHECK(current_context_id() == -1);
  CHECK_FALSE(has_context(first));
  Context second;
  CHECK(second.id() != first);
  CHECK_THROWS_WITH(get_gradients(first), Catch::Contains("Could not find autograd context with id: " +
                                                          std::to_string(first)));
  CHECK_THROWS_WITH(backward(first, {}), Catch::Contains("Could not find autograd context with id"));
  // A message of a released context that arrives late does not bring it back.
  CHECK_THROWS_WITH(ContextTable::instance().get_or_create(first), Catch::Contains("it was released on this worker"));
  CHECK_FALSE(has_context(first));
}

TEST_CASE("dist_autograd: gradients through an RPC land in the context, not in .grad", "[dist_autograd]") {
  OneWorker job;
  Tensor w = leaf({1, 2, 3}, {3});
  Tensor c = from_vector<float>({4, 5, 6}, {3});
  Context ctx;
  Tensor y = rpc::rpc_sync("worker0", "da_unit.mul", {Value(w), Value(c)}).as_tensor();
  CHECK(autograd::requires_grad(y));
  CHECK_FALSE(autograd::is_leaf(y));
  backward(ctx.id(), {autograd::sum(y)});
  const GradientMap grads = get_gradients(ctx.id());
  REQUIRE(grads.size() == 1);
  CHECK(equal(grads.at(w), c));
  CHECK_FALSE(autograd::grad(w).defined());
  CHECK_THROWS_WITH(grads.at(c), Catch::Contains("holds no gradient"));

  // Without retain_graph the graph cannot be run again in this context.
  CHECK_THROWS_WITH(backward(ctx.id(), {autograd::sum(y)}), Catch::Contains("backward through the graph a second time"));
}

TEST_CASE("dist_autograd: retain_graph lets a context run backward twice, accumulating", "[dist_autograd]") {
  OneWorker job;
  Tensor w = leaf({1, -1}, {2});
  Context ctx;
  Tensor y = rpc::rpc_sync("worker0", "da_unit.mul", {Value(w), Value(w)}).as_tensor();  // w * w
  Tensor loss = autograd::sum(y);
  backward(ctx.id(), {loss}, /*retain_graph=*/true);
  CHECK(equal(get_gradients(ctx.id()).at(w), from_vector<float>({2, -2}, {2})));
  backward(ctx.id(), {loss});
  CHECK(equal(get_gradients(ctx.id()).at(w), from_vector<float>({4, -4}, {2})));
}

TEST_CASE("dist_autograd: a remote Linear gives the gradients of a local one", "[dist_autograd]") {
  OneWorker job;
  Tensor x = from_vector<float>({0.5f, -1.0f, 2.0f, 0.25f}, {2, 2});
  Tensor w = leaf({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor b = leaf({0.1f, 0.2f, 0.3f}, {3});
  autograd::backward(autograd::norm(autograd::linear(x, w, b)));
  const Tensor local_w = autograd::grad(w);
  const Tensor local_b = autograd::grad(b);
  Context ctx;
  Tensor out = rpc::rpc_sync("worker0", "da_unit.linear", {Value(x), Value(w), Value(b)}).as_tensor();
  backward(ctx.id(), {autograd::norm(out)});
  const GradientMap grads = get_gradients(ctx.id());
  CHECK(allclose(grads.at(w), local_w));
  CHECK(allclose(grads.at(b), local_b));
  CHECK(equal(autograd::grad(w), local_w));  // untouched by the distributed pass
}

TEST_CASE("dist_autograd: argument checks and errors name the context", "[dist_autograd]") {
  OneWorker job;
  Context ctx;
  Tensor w = leaf({1, 2}, {2});
  Tensor y = rpc::rpc_sync("worker0", "da_unit.mul", {Value(w), Value(w)}).as_tensor();
  CHECK_THROWS_WITH(backward(ctx.id(), {}), Catch::Contains("no roots"));
  CHECK_THROWS_WITH(backward(ctx.id(), {y}), Catch::Contains("roots must be scalars"));
  CHECK_THROWS_WITH(backward(ctx.id(), {from_vector<float>({1}, {1})}), Catch::Contains("does not require grad"));
  // A local backward cannot cross the RPC edge.
  CHECK_THROWS_WITH(autograd::backward(autograd::sum(y)), Catch::Contains("must be run with dist_autograd::backward"));
}

TEST_CASE("dist_autograd: an exception in a remote part fails backward with the worker's name", "[dist_autograd]") {
  OneWorker job;
  Context ctx;
  Tensor w = leaf({1, 2}, {2});
  Tensor y = rpc::rpc_sync("worker0", "da_unit.bad_backward", {Value(w)}).as_tensor();
  CHECK_THROWS_WITH(backward(ctx.id(), {autograd::sum(y)}),
                    Catch::Contains("worker0") && Catch::Contains("bad backward rule"));
}

TEST_CASE("dist_autograd: RPC outside a context records nothing", "[dist_autograd]") {
  OneWorker job;
  Tensor w = leaf({1, 2}, {2});
  Tensor y = rpc::rpc_sync("worker0", "da_unit.mul", {Value(w), Value(w)}).as_tensor();
  CHECK_FALSE(autograd::requires_grad(y));
  CHECK(num_contexts() == 0);
}

}  // namespace
}  // namespace braid::dist_autograd
