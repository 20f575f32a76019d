// RemoteModule in a job of one worker: "worker0" is this process, so the module is made and run by the
// same RPC machinery as across processes (remote(), RRef method calls), and its owner-side state can be
// checked directly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "base/error.h"
#include "dist_autograd/hosted_module.h"
#include "dist_autograd/module_registry.h"
#include "dist_autograd/remote_module.h"
#include "nn/linear.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tests/unit/dist_autograd/solo_rpc.h"

namespace braid::dist_autograd {

using rpc::Value;

namespace {

void set_param(const std::shared_ptr<nn::Module>& m, const std::string& name, const Tensor& value) {
  autograd::NoGradGuard no_grad;
  m->parameter(name).copy_(value);
}

Tensor mat(std::vector<float> values, Shape shape) { return from_vector(values, shape); }

const Tensor kW = mat({1, 2, 3, 4, 5, 6}, {3, 2});
const Tensor kB = mat({0.5f, -1, 2}, {3});
const Tensor kX = mat({1, -1, 2, 0.5f}, {2, 2});
// x W^T + b, by hand.
const Tensor kY = mat({-0.5f, -2, 1, 3.5f, 7, 15}, {2, 3});

RemoteModule make_known_linear(const std::string& remote_device) {
  RemoteModule layer(remote_device, "nn.Linear", {Value(int64_t{2}), Value(int64_t{3})});
  const auto m = local_module(layer.module_rref());  // this worker owns it
  set_param(m, "weight", kW);
  set_param(m, "bias", kB);
  return layer;
}

}  // namespace

TEST_CASE("RemoteModule: a remote Linear on worker0 computes x W^T + b", "[remote_module]") {
  testing::SoloRpc job;
  for (const std::string dev : {"worker0/cpu", "worker0", "rank:0/cpu"}) {
    INFO("remote_device " << dev);
    RemoteModule layer = make_known_linear(dev);
    CHECK(layer.owner().name == "worker0");
    CHECK(layer.device() == Device::cpu());
    CHECK(layer.module_class() == "nn.Linear");
    CHECK(layer.module_rref().is_owner());
    CHECK(equal(layer(kX), kY));
    CHECK(equal(layer.forward_async(kX).value(std::chrono::seconds(10)), kY));
    const nn::TensorList many = layer.forward_many({kX});
    REQUIRE(many.size() == 1);
    CHECK(equal(many[0], kY));
    // The result is in the graph of the module's parameters (the call stayed in this process).
    CHECK(autograd::requires_grad(layer(kX)));
  }
}

TEST_CASE("RemoteModule: keyword arguments and bias=False reach the module's constructor", "[remote_module]") {
  testing::SoloRpc job;
  rpc::Args args{Value(int64_t{4}), Value(int64_t{2})};
  args.kwargs.set("bias", Value(false));
  RemoteModule layer("worker0", "nn.Linear", args);
  const auto m = local_module(layer.module_rref());
  const auto* linear = dynamic_cast<nn::Linear*>(m.get());
  REQUIRE(linear != nullptr);
  CHECK(linear->in_features() == 4);
  CHECK(linear->out_features() == 2);
  CHECK_FALSE(linear->bias().defined());
  CHECK(layer.remote_parameters().size() == 1);
}

TEST_CASE("RemoteModule: remote_parameters are RRefs, owned by the owner, of the module's own parameters",
          "[remote_module]") {
  testing::SoloRpc job;
  RemoteModule layer = make_known_linear("worker0/cpu");
  const auto m = local_module(layer.module_rref());
  const std::vector<rpc::RRef> params = layer.remote_parameters();
  const nn::TensorList expected = m->parameters();
  REQUIRE(params.size() == expected.size());
  REQUIRE(params.size() == 2);
  for (size_t i = 0; i < params.size(); ++i) {
    CHECK(params[i].owner().name == "worker0");
    CHECK(params[i].is_owner());
    // The very tensor the module holds (an optimizer on the owner updates the module through it).
    CHECK(params[i].local_value().as_tensor().unsafe_impl() == expected[i].unsafe_impl());
    CHECK(equal(params[i].to_here().as_tensor(), expected[i]));
  }
  CHECK(equal(params[0].to_here().as_tensor(), kW));
  CHECK(equal(params[1].to_here().as_tensor(), kB));

  // The module's state, as to_here() of the module gives it (here: the object, on its owner).
  const nn::StateDict state = state_dict_of(layer.module_rref().to_here());
  REQUIRE(state.size() == 2);
  CHECK(state[0].first == "weight");
  CHECK(equal(state[0].second, kW));
  CHECK(state[1].first == "bias");
  CHECK(equal(state[1].second, kB));
  CHECK(state[0].second.unsafe_impl() != m->parameter("weight").unsafe_impl());  // a copy
}

TEST_CASE("RemoteModule: an EmbeddingBag with a given table returns the bags' sums", "[remote_module]") {
  testing::SoloRpc job;
  rpc::Args args{Value(int64_t{4}), Value(int64_t{2})};
  args.kwargs.set("mode", Value("sum"));
  args.kwargs.set("sparse", Value(true));
  args.kwargs.set("_weight", Value(mat({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2})));
  RemoteModule bag("worker0/cpu", "nn.EmbeddingBag", args);
  const Tensor input = from_vector(std::vector<int64_t>{0, 2, 3, 1}, {4});
  const Tensor offsets = from_vector(std::vector<int64_t>{0, 1}, {2});
  const nn::TensorList out = bag.forward_many({input, offsets});
  REQUIRE(out.size() == 1);
  // bag 0 = row 0; bag 1 = rows 2 + 3 + 1.
  CHECK(equal(out[0], mat({0, 1, 60, 63}, {2, 2})));
  // A module with several inputs and one output: forward(Tensor) would call it with one.
  CHECK_THROWS_AS(bag.forward(input), InvalidArgument);
}

TEST_CASE("RemoteModule: errors name the class, the arguments and the remote_device", "[remote_module]") {
  testing::SoloRpc job;
  CHECK_THROWS_WITH(RemoteModule("worker0/gpu", "nn.Linear", {}),
                    Catch::Contains("Could not parse remote_device 'worker0/gpu'"));
  CHECK_THROWS_WITH(RemoteModule("worker5", "nn.Linear", {}), Catch::Contains("no worker is named 'worker5'"));
  CHECK_THROWS_WITH(RemoteModule("worker0", "", {}), Catch::Contains("the module class name is empty"));
  CHECK_THROWS_WITH(RemoteModule("worker0", "nn.Nope", {}),
                    Catch::Contains("RemoteModule('worker0', nn.Nope): creating the module on worker 'worker0' "
                                    "failed: unknown module class 'nn.Nope' (registered: ") &&
                        Catch::Contains("nn.Linear"));
  CHECK_THROWS_WITH(RemoteModule("worker0", "nn.Linear", {Value(int64_t{2})}),
                    Catch::Contains("nn.Linear: missing argument 'out_features'"));
  CHECK_THROWS_WITH(RemoteModule("worker0", "nn.Linear", {Value(int64_t{2}), Value(int64_t{3}), Value(true), Value(1)}),
                    Catch::Contains("nn.Linear: takes at most 3 arguments (4 given)"));
  rpc::Args typo{Value(int64_t{2}), Value(int64_t{3})};
  typo.kwargs.set("bais", Value(false));
  CHECK_THROWS_WITH(RemoteModule("worker0", "nn.Linear", typo),
                    Catch::Contains("nn.Linear: got an unexpected keyword argument 'bais'"));
  rpc::Args twice{Value(int64_t{2}), Value(int64_t{3})};
  twice.kwargs.set("in_features", Value(int64_t{2}));
  CHECK_THROWS_WITH(RemoteModule("worker0", "nn.Linear", twice),
                    Catch::Contains("argument 'in_features' appears both positionally and by keyword"));
  CHECK_THROWS_WITH(RemoteModule("worker0", "nn.Linear", {Value("two"), Value(int64_t{3})}),
                    Catch::Contains("nn.Linear: argument 'in_features': "));
  rpc::Args max_norm{Value(int64_t{4}), Value(int64_t{2})};
  max_norm.kwargs.set("max_norm", Value(1.0));
  CHECK_THROWS_WITH(RemoteModule("worker0", "nn.EmbeddingBag", max_norm),
                    Catch::Contains("nn.EmbeddingBag: argument 'max_norm' is only supported at its default"));
  rpc::Args mode{Value(int64_t{4}), Value(int64_t{2})};
  mode.kwargs.set("mode", Value("median"));
  CHECK_THROWS_WITH(RemoteModule("worker0", "nn.EmbeddingBag", mode), Catch::Contains("mode has to be one of"));

  // A forward that fails on the owner (wrong input width) reaches the caller.
  RemoteModule layer = make_known_linear("worker0");
  CHECK_THROWS_AS(layer(ones({2, 5})), Error);
  CHECK_THROWS_WITH(layer.forward_value_async({Value("x")}).value(std::chrono::seconds(10)),
                    Catch::Contains("RemoteModule.forward of 'nn.Linear': argument 0 is string") &&
                        Catch::Contains("expected a tensor or None"));
}

TEST_CASE("module classes: user classes register by name, once", "[remote_module]") {
  static const bool registered = [] {
    register_module_class("test.Doubler", [](const rpc::Args& a) {
      const ArgReader r("test.Doubler", a, {"features"});
      auto m = std::make_shared<nn::Linear>(r.get_int("features"), r.get_int("features"), false);
      autograd::NoGradGuard no_grad;
      m->parameter("weight").copy_(mul(eye(r.get_int("features")), 2.0));
      return m;
    });
    return true;
  }();
  REQUIRE(registered);
  CHECK(has_module_class("test.Doubler"));
  CHECK(has_module_class("nn.EmbeddingBag"));
  CHECK_FALSE(has_module_class("test.Missing"));
  const auto names = module_class_names();
  CHECK(std::is_sorted(names.begin(), names.end()));
  CHECK_THROWS_WITH(register_module_class("test.Doubler", [](const rpc::Args&) { return nullptr; }),
                    Catch::Contains("a module class named 'test.Doubler' is already registered"));
  CHECK_THROWS_WITH(register_module_class("", [](const rpc::Args&) { return nullptr; }),
                    Catch::Contains("the class name is empty"));
  CHECK_THROWS_WITH(register_module_class("test.Null", nullptr), Catch::Contains("the factory of 'test.Null' is empty"));

  testing::SoloRpc job;
  RemoteModule doubler("worker0", "test.Doubler", {Value(int64_t{3})});
  CHECK(equal(doubler(mat({1, 2, 3}, {1, 3})), mat({2, 4, 6}, {1, 3})));
}

}  // namespace braid::dist_autograd
