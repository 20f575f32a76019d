// What every optimizer shares: the functional form (step_with) against the .grad form, state-dict round
// trips that continue training bit for bit, and the errors of construction, step_with and load_state_dict.
#include "nn/optim/optimizer.h"

#include <functional>
#include <memory>

#include "autograd/engine.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "optim_test_util.h"
#include "tensor/compare.h"
#include "tensor/ops/elementwise.h"

using namespace braid;
using namespace braid::nn::optim;
using braid::nn::TensorList;
using namespace braid::nn::optim::testing;

namespace {

using Factory = std::function<std::unique_ptr<Optimizer>(const TensorList&)>;

// One configuration per optimizer, each with its options switched on.
std::vector<std::pair<std::string, Factory>> factories() {
  return {
      {"SGD momentum+nesterov+wd",
       [](const TensorList& ps) {
         return std::make_unique<SGD>(ps, SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01,
                                                     .nesterov = true});
       }},
      {"SGD momentum+dampening",
       [](const TensorList& ps) {
         return std::make_unique<SGD>(ps, SGDOptions{.lr = 0.05, .momentum = 0.8, .dampening = 0.3});
       }},
      {"Adam amsgrad+wd",
       [](const TensorList& ps) {
         return std::make_unique<Adam>(ps, AdamOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
       }},
      {"AdamW",
       [](const TensorList& ps) { return std::make_unique<AdamW>(ps, AdamWOptions{.lr = 0.01}); }},
  };
}

// A small regression model: W [3, 2], b [3], loss = mse(x W^T + b, y) on fixed data.
struct Model {
  Tensor w, b, x, y;
  explicit Model(uint64_t seed) {
    Generator gen(seed);
    w = randn({3, 2}, DType::Float64, &gen);
    b = randn({3}, DType::Float64, &gen);
    x = randn({4, 2}, DType::Float64, &gen);
    y = randn({4, 3}, DType::Float64, &gen);
    autograd::set_requires_grad(w);
    autograd::set_requires_grad(b);
  }
  TensorList params() const { return {w, b}; }
  Tensor loss() const { return autograd::mse_loss(autograd::linear(x, w, b), y); }
  // A model with copies of this one's current parameters.
  Model copy() const {
    Model m = *this;
    m.w = w.clone();
    m.b = b.clone();
    autograd::set_requires_grad(m.w);
    autograd::set_requires_grad(m.b);
    return m;
  }
};

void train_grad_form(Optimizer& opt, const Model& m, int steps) {
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    autograd::backward(m.loss());
    opt.step();
  }
}

void train_functional_form(Optimizer& opt, const Model& m, int steps) {
  for (int i = 0; i < steps; ++i) {
    const TensorList g = autograd::grad({m.loss()}, m.params());
    opt.step_with({{m.w, g[0]}, {m.b, g[1]}});
  }
}

void require_same_state(const Optimizer& a, const Optimizer& b) {
  REQUIRE(a.num_params() == b.num_params());
  for (size_t i = 0; i < a.num_params(); ++i) {
    REQUIRE(a.state(i).size() == b.state(i).size());
    for (const auto& [name, t] : a.state(i)) {
      INFO("state " << name << " of parameter " << i);
      REQUIRE(equal(t, b.state(i).at(name)));
    }
  }
}

}  // namespace

TEST_CASE("optimizers: step_with(gradients) equals step() from .grad", "[optim][functional]") {
  for (const auto& [label, make] : factories()) {
    DYNAMIC_SECTION(label) {
      Model a(7);
      Model b = a.copy();
      auto opt_a = make(a.params());
      auto opt_b = make(b.params());
      // b's .grad holds garbage the functional form must ignore.
      autograd::set_grad(b.w, full({3, 2}, 1e6, DType::Float64));
      train_grad_form(*opt_a, a, 4);
      train_functional_form(*opt_b, b, 4);
      REQUIRE(equal(a.w, b.w));
      REQUIRE(equal(a.b, b.b));
      require_same_state(*opt_a, *opt_b);
      require_close(autograd::grad(b.w), std::vector<double>(6, 1e6));
    }
  }
}

TEST_CASE("optimizers: step_with leaves unlisted parameters alone", "[optim][functional]") {
  Tensor p = param({1.0});
  Tensor q = param({2.0});
  SGD opt({p, q}, SGDOptions{.lr = 0.5});
  opt.step_with({{q, from_vector<double>({1.0}, {1})}, {p, Tensor()}});
  require_close(p, {1.0});
  require_close(q, {1.5});
}

TEST_CASE("optimizers: state_dict round trip continues training identically", "[optim][state_dict]") {
  for (const auto& [label, make] : factories()) {
    DYNAMIC_SECTION(label) {
      Model a(11);
      auto opt_a = make(a.params());
      train_grad_form(*opt_a, a, 3);
      const OptimizerStateDict saved = opt_a->state_dict();
      Model b = a.copy();  // the parameters at the snapshot
      train_grad_form(*opt_a, a, 3);

      auto opt_b = make(b.params());
      SECTION("directly") { opt_b->load_state_dict(saved); }
      SECTION("through the flat form") {
        opt_b->load_state_dict(OptimizerStateDict::from_flat(saved.to_flat()));
      }
      train_grad_form(*opt_b, b, 3);
      REQUIRE(equal(a.w, b.w));
      REQUIRE(equal(a.b, b.b));
      require_same_state(*opt_a, *opt_b);
    }
  }
}

TEST_CASE("optimizers: state_dict is a snapshot and carries the options", "[optim][state_dict]") {
  Tensor p = param({1.0, 2.0});
  SGD opt({p}, SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  give_grad(p, {1.0, 1.0});
  opt.step();
  const OptimizerStateDict sd = opt.state_dict();
  opt.step();
  require_close(sd.state.at(0).at("momentum_buffer"), {1.0, 1.0});  // not the live buffer
  CHECK(sd.num_params == 1);
  CHECK(sd.options.at("lr") == 0.1);
  CHECK(sd.options.at("momentum") == 0.9);
  CHECK(sd.options.at("nesterov") == 1.0);

  // Loading sets the options too.
  Tensor q = param({0.0, 0.0});
  SGD other({q}, SGDOptions{.lr = 1.0});
  other.load_state_dict(sd);
  CHECK(other.options().lr == 0.1);
  CHECK(other.options().momentum == 0.9);
  CHECK(other.options().nesterov);

  const auto flat = sd.to_flat();
  CHECK(flat.front().first == "state.0.momentum_buffer");
  CHECK(flat.back().first == "num_params");
}

TEST_CASE("optimizers: loaded state takes the parameter's dtype; step keeps its own", "[optim][state_dict]") {
  Tensor p = param({1.0});
  Adam a({p});
  give_grad(p, {1.0});
  a.step();
  OptimizerStateDict sd = a.state_dict();
  Tensor f = from_vector<float>({1.0f}, {1});
  autograd::set_requires_grad(f);
  Adam b({f});
  b.load_state_dict(sd);
  CHECK(b.state(0).at("exp_avg").dtype() == DType::Float32);
  CHECK(b.state(0).at("step").dtype() == DType::Float32);
  // The loaded tensors are copies.
  sd.state.at(0).at("exp_avg").fill_(42.0);
  require_close(b.state(0).at("exp_avg"), {0.1}, 1e-7);
}

TEST_CASE("optimizers: load_state_dict errors change nothing", "[optim][state_dict][errors]") {
  Tensor p = param({1.0, 2.0});
  Tensor q = param({3.0});
  Adam opt({{"fc.weight", p}, {"fc.bias", q}}, AdamOptions{.lr = 0.1});
  give_grad(p, {1.0, 1.0});
  give_grad(q, {1.0});
  opt.step();
  const OptimizerStateDict good = opt.state_dict();

  SECTION("parameter count") {
    OptimizerStateDict bad = good;
    bad.num_params = 3;
    REQUIRE_THROWS_WITH(opt.load_state_dict(bad),
                        Catch::Contains("doesn't match the size of optimizer's group (3 parameters loaded, 2"));
  }
  SECTION("shape") {
    OptimizerStateDict bad = good;
    bad.state[1]["exp_avg"] = zeros({2}, DType::Float64);
    REQUIRE_THROWS_WITH(opt.load_state_dict(bad),
                        Catch::Contains("state 'exp_avg' of parameter 1 ('fc.bias') has shape [2] but the parameter "
                                        "has shape [1]"));
  }
  SECTION("index out of range") {
    OptimizerStateDict bad = good;
    bad.state[5]["exp_avg"] = zeros({1}, DType::Float64);
    REQUIRE_THROWS_WITH(opt.load_state_dict(bad), Catch::Contains("parameter index 5"));
  }
  SECTION("unknown state") {
    OptimizerStateDict bad = good;
    bad.state[0]["momentum_buffer"] = zeros({2}, DType::Float64);
    REQUIRE_THROWS_WITH(opt.load_state_dict(bad), Catch::Contains("unexpected state 'momentum_buffer'"));
  }
  SECTION("unknown option") {
    OptimizerStateDict bad = good;
    bad.options["nesterov"] = 1.0;
    REQUIRE_THROWS_WITH(opt.load_state_dict(bad), Catch::Contains("unknown option 'nesterov'"));
  }
  SECTION("invalid option") {
    OptimizerStateDict bad = good;
    bad.options["lr"] = -1.0;
    bad.state[0]["exp_avg"] = full({2}, 9.0, DType::Float64);
    REQUIRE_THROWS_WITH(opt.load_state_dict(bad), Catch::Contains("Invalid learning rate"));
  }
  CHECK(opt.options().lr == 0.1);
  require_close(opt.state(0).at("exp_avg"), {0.1, 0.1});
  require_close(opt.state(1).at("exp_avg_sq"), {0.001});
}

TEST_CASE("optimizers: from_flat rejects malformed keys", "[optim][state_dict][errors]") {
  const Tensor one = scalar_tensor(1.0, DType::Float64);
  REQUIRE_THROWS_WITH(OptimizerStateDict::from_flat({{"state.x.exp_avg", one}, {"num_params", one}}),
                      Catch::Contains("malformed state key 'state.x.exp_avg'"));
  REQUIRE_THROWS_WITH(OptimizerStateDict::from_flat({{"state.0", one}, {"num_params", one}}),
                      Catch::Contains("malformed state key"));
  REQUIRE_THROWS_WITH(OptimizerStateDict::from_flat({{"weights", one}}), Catch::Contains("unexpected key 'weights'"));
  REQUIRE_THROWS_WITH(OptimizerStateDict::from_flat({{"options.lr", one}}),
                      Catch::Contains("missing key 'num_params'"));
}

TEST_CASE("optimizers: construction errors", "[optim][errors]") {
  const SGDOptions o{.lr = 0.1};
  REQUIRE_THROWS_WITH(SGD(TensorList{}, o), Catch::Contains("optimizer got an empty parameter list"));
  Tensor p = param({1.0});
  REQUIRE_THROWS_WITH(SGD({p, p}, o), Catch::Contains("parameter 1 appears more than once"));
  REQUIRE_THROWS_WITH(SGD({Tensor()}, o), Catch::Contains("undefined"));
  REQUIRE_THROWS_WITH(SGD({from_vector<int64_t>({1})}, o), Catch::Contains("only floating point parameters"));
  Tensor non_leaf = autograd::mul(p, 2.0);
  REQUIRE_THROWS_WITH(SGD({{"h", non_leaf}}, o),
                      Catch::Contains("can't optimize a non-leaf Tensor (parameter 0 ('h'))"));
}

TEST_CASE("optimizers: step_with errors change nothing", "[optim][functional][errors]") {
  Tensor p = param({1.0, 2.0});
  Tensor stranger = param({1.0});
  SGD opt({{"w", p}}, SGDOptions{.lr = 0.1});
  const Tensor g = from_vector<double>({1.0, 1.0});
  REQUIRE_THROWS_WITH(opt.step_with({{p, g}, {stranger, from_vector<double>({1.0}, {1})}}),
                      Catch::Contains("entry 1") && Catch::Contains("is not a parameter of this optimizer"));
  REQUIRE_THROWS_WITH(opt.step_with({{p, g}, {p, g}}), Catch::Contains("parameter 0 ('w') is listed more than once"));
  REQUIRE_THROWS_WITH(opt.step_with({{p, from_vector<double>({1.0}, {1})}}),
                      Catch::Contains("gradient of shape [1] for parameter 0 ('w') of shape [2]"));
  // An alias is a different handle: the optimizer holds the parameter itself.
  REQUIRE_THROWS_WITH(opt.step_with({{p.alias(), g}}), Catch::Contains("is not a parameter"));
  require_close(p, {1.0, 2.0});
  REQUIRE_THROWS(opt.state(1));
}

TEST_CASE("optimizers: step(closure) re-evaluates and returns the loss", "[optim]") {
  Tensor p = param({3.0});
  SGD opt({p}, SGDOptions{.lr = 0.25});
  int calls = 0;
  const Tensor loss = opt.step([&] {
    ++calls;
    opt.zero_grad();
    Tensor l = autograd::mul(p, p);  // d/dp = 2p = 6
    autograd::backward(l);
    return l;
  });
  CHECK(calls == 1);
  CHECK(loss.item<double>() == 9.0);
  require_close(p, {1.5});  // 3 - 0.25*6
}
