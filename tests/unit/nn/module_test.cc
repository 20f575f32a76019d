// nn::Module behaviour through real layers: parameter and buffer naming and order, tied parameters,
// train/eval, zero_grad, dtype conversion, state dicts (strict and not), hooks, apply() and printing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "nn/activation.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/normalization.h"
#include "tensor/compare.h"
#include "tests/unit/nn/nn_test_util.h"

namespace braid::nn {
namespace {

using testing::set_values;
using testing::values_of;

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& list) {
  std::vector<std::string> out;
  for (const auto& [n, t] : list) out.push_back(n);
  return out;
}

// A model with its own parameter and buffers besides its children, like a user's model would have.
class Block : public Module {
 public:
  Block() : Module("Block") {
    scale_ = register_parameter("scale", ones({2}));
    fc1_ = register_module("fc1", std::make_shared<Linear>(3, 4));
    act_ = register_module("act", std::make_shared<ReLU>());
    fc2_ = register_module("fc2", std::make_shared<Linear>(4, 2));
    steps_ = register_buffer("steps", zeros({1}, DType::Int64));
    running_ = register_buffer("running", zeros({2}));
  }
  Tensor forward(const Tensor& x) override { return autograd::mul((*fc2_)((*act_)((*fc1_)(x))), scale_); }

  std::shared_ptr<Linear> fc1_, fc2_;
  std::shared_ptr<ReLU> act_;
  Tensor scale_, steps_, running_;
};

class Outer : public Module {
 public:
  Outer() : Module("Outer") {
    block_ = register_module("block", std::make_shared<Block>());
    head_ = register_module("head", std::make_shared<Sequential>(
                                        std::initializer_list<std::shared_ptr<Module>>{
                                            std::make_shared<Linear>(2, 2), std::make_shared<Dropout>(0.5)}));
  }
  Tensor forward(const Tensor& x) override { return (*head_)((*block_)(x)); }

  std::shared_ptr<Block> block_;
  std::shared_ptr<Sequential> head_;
};

// Holds a tensor it is given: how two modules end up sharing (tying) one parameter.
class Holder : public Module {
 public:
  explicit Holder(const Tensor& w) : Module("Holder") { w_ = register_parameter("w", w); }
  Tensor w_;
};

class Tied : public Module {
 public:
  Tied() : Module("Tied") {
    shared_ = register_parameter("shared", zeros({3}));
    register_module("a", std::make_shared<Holder>(shared_));
    register_module("b", std::make_shared<Holder>(shared_));
    own_ = register_parameter("own", zeros({1}));
  }
  Tensor shared_, own_;
};

TEST_CASE("module: named_parameters order and dotted names of nested modules", "[nn][module]") {
  Outer m;
  CHECK(names_of(m.named_parameters()) ==
        std::vector<std::string>{"block.scale", "block.fc1.weight", "block.fc1.bias", "block.fc2.weight",
                                 "block.fc2.bias", "head.0.weight", "head.0.bias"});
  CHECK(names_of(m.block_->named_parameters()) ==
        std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
  CHECK(names_of(m.block_->named_parameters(/*recurse=*/false)) == std::vector<std::string>{"scale"});
  CHECK(m.named_parameters(false).empty());
  CHECK(m.parameters().size() == 7);
  // The handles are the modules' own tensors, not copies.
  CHECK(m.parameter("block.fc2.weight").is_same(m.block_->fc2_->weight()));
  CHECK(m.parameter("head.0.bias").is_same(std::static_pointer_cast<Linear>((*m.head_)[0])->bias()));
  for (const auto& p : m.parameters()) {
    CHECK(autograd::requires_grad(p));
    CHECK(autograd::is_leaf(p));
  }
  CHECK_THROWS_WITH(m.parameter("block.fc3.weight"), Catch::Contains("block.fc3.weight"));

  std::vector<std::string> modules;
  for (auto& [n, mod] : m.named_modules()) modules.push_back(n + ":" + mod->type_name());
  CHECK(modules == std::vector<std::string>{":Outer", "block:Block", "block.fc1:Linear", "block.act:ReLU",
                                            "block.fc2:Linear", "head:Sequential", "head.0:Linear",
                                            "head.1:Dropout"});
}

TEST_CASE("module: tied parameters are listed once, under their first name", "[nn][module]") {
  Tied m;
  CHECK(names_of(m.named_parameters()) == std::vector<std::string>{"shared", "own"});
  CHECK(m.parameters().size() == 2);
  // The state dict keeps every name, as PyTorch's does, so either module can be loaded on its own.
  const auto sd = names_of(m.state_dict());
  CHECK(sd == std::vector<std::string>{"shared", "own", "a.w", "b.w"});
  // Loading through either name writes the one shared tensor.
  m.load_state_dict({{"shared", full({3}, 1.0)}, {"own", zeros({1})}, {"a.w", full({3}, 1.0)},
                     {"b.w", full({3}, 1.0)}});
  CHECK(values_of(m.shared_) == std::vector<double>{1, 1, 1});
}

TEST_CASE("module: buffers are named, kept out of parameters, and in the state dict", "[nn][module]") {
  Outer m;
  CHECK(names_of(m.named_buffers()) == std::vector<std::string>{"block.steps", "block.running"});
  CHECK(m.buffers().size() == 2);
  CHECK(m.named_buffers(false).empty());
  CHECK_FALSE(autograd::requires_grad(m.block_->steps_));
  const auto sd = names_of(m.state_dict());
  CHECK(sd.size() == 9);
  CHECK(std::find(sd.begin(), sd.end(), "block.steps") != sd.end());
  CHECK(std::find(sd.begin(), sd.end(), "block.running") != sd.end());
  CHECK(m.parameter("block.running").is_same(m.block_->running_));
}

TEST_CASE("module: registering a taken or dotted name is refused", "[nn][module]") {
  struct Bad : Module {
    Bad() : Module("Bad") { register_parameter("w", zeros({1})); }
    void again() { register_buffer("w", zeros({1})); }
    void dotted() { register_parameter("a.b", zeros({1})); }
  } m;
  CHECK_THROWS_WITH(m.again(), Catch::Contains("already exists"));
  CHECK_THROWS_WITH(m.dotted(), Catch::Contains("a.b"));
}

TEST_CASE("module: train() and eval() reach every submodule", "[nn][module]") {
  Outer m;
  for (auto& [n, mod] : m.named_modules()) CHECK(mod->is_training());
  m.eval();
  for (auto& [n, mod] : m.named_modules()) CHECK_FALSE(mod->is_training());
  // Dropout follows the flag: identity in eval.
  const Tensor x = randn({4, 3});
  autograd::NoGradGuard no_grad;
  CHECK(equal(m(x), m(x)));
  m.train();
  for (auto& [n, mod] : m.named_modules()) CHECK(mod->is_training());
  m.block_->train(false);
  CHECK(m.is_training());
  CHECK_FALSE(m.block_->fc1_->is_training());
  CHECK(m.head_->is_training());
}

TEST_CASE("module: zero_grad clears (set_to_none) or zeroes every gradient", "[nn][module]") {
  Block m;
  autograd::backward(autograd::sum(m(randn({5, 3}))));
  for (const auto& p : m.parameters()) REQUIRE(autograd::grad(p).defined());
  m.zero_grad(/*set_to_none=*/false);
  for (const auto& p : m.parameters()) {
    REQUIRE(autograd::grad(p).defined());
    for (double v : values_of(autograd::grad(p))) CHECK(v == 0.0);
  }
  autograd::backward(autograd::sum(m(randn({5, 3}))));
  m.zero_grad();
  for (const auto& p : m.parameters()) CHECK_FALSE(autograd::grad(p).defined());
}

TEST_CASE("module: to(Float64) converts in place, keeping handles, leaves and requires_grad", "[nn][module]") {
  Outer m;
  const Tensor w = m.block_->fc1_->weight();
  const std::vector<double> before = values_of(w);
  m.to(DType::Float64);
  CHECK(w.dtype() == DType::Float64);
  CHECK(m.block_->fc1_->weight().is_same(w));
  CHECK(values_of(w) == before);  // float32 -> float64 is exact
  for (const auto& p : m.parameters()) {
    CHECK(p.dtype() == DType::Float64);
    CHECK(autograd::requires_grad(p));
    CHECK(autograd::is_leaf(p));
  }
  CHECK(m.block_->running_.dtype() == DType::Float64);
  CHECK(m.block_->steps_.dtype() == DType::Int64);  // integer buffers keep their dtype
  const Tensor y = m(randn({2, 3}, DType::Float64));
  CHECK(y.dtype() == DType::Float64);
  autograd::backward(autograd::sum(y));
  CHECK(autograd::grad(w).dtype() == DType::Float64);
}

TEST_CASE("module: state_dict round trip into a fresh model", "[nn][module][state_dict]") {
  Outer a, b;
  REQUIRE_FALSE(equal(a.block_->fc1_->weight(), b.block_->fc1_->weight()));
  set_values(a.block_->running_, {3, 4});
  const Tensor handle = b.block_->fc1_->weight();
  b.load_state_dict(a.state_dict());
  CHECK(b.block_->fc1_->weight().is_same(handle));
  for (auto& [n, t] : a.state_dict()) CHECK(equal(t, b.parameter(n)));
  // A state dict holds the live tensors: later changes to the model show through.
  const StateDict sd = a.state_dict();
  set_values(a.block_->scale_, {7, 8});
  CHECK(values_of(sd[0].second) == std::vector<double>{7, 8});
}

TEST_CASE("module: strict load_state_dict names missing and unexpected keys and changes nothing",
          "[nn][module][state_dict]") {
  Block m;
  const StateDict good = [&] {
    Block other;
    StateDict sd;
    for (auto& [n, t] : other.state_dict()) sd.emplace_back(n, t.clone());
    return sd;
  }();
  auto snapshot = [&] {
    std::vector<std::vector<double>> out;
    for (auto& [n, t] : m.state_dict()) out.push_back(values_of(t));
    return out;
  };
  const auto before = snapshot();

  SECTION("missing") {
    StateDict sd = good;
    sd.erase(std::find_if(sd.begin(), sd.end(), [](const auto& kv) { return kv.first == "fc1.bias"; }));
    CHECK_THROWS_AS(m.load_state_dict(sd), InvalidArgument);
    CHECK_THROWS_WITH(m.load_state_dict(sd),
                      Catch::Contains("Missing key(s) in state_dict") && Catch::Contains("\"fc1.bias\"") &&
                          !Catch::Contains("Unexpected"));
  }
  SECTION("unexpected") {
    StateDict sd = good;
    sd.emplace_back("fc3.weight", zeros({1}));
    CHECK_THROWS_WITH(m.load_state_dict(sd),
                      Catch::Contains("Unexpected key(s) in state_dict") && Catch::Contains("\"fc3.weight\"") &&
                          !Catch::Contains("Missing"));
  }
  SECTION("both") {
    StateDict sd = good;
    sd.erase(sd.begin());
    sd.emplace_back("extra", zeros({1}));
    CHECK_THROWS_WITH(m.load_state_dict(sd), Catch::Contains("Missing key(s) in state_dict: \"scale\"") &&
                                                 Catch::Contains("Unexpected key(s) in state_dict: \"extra\""));
  }
  SECTION("size mismatch, after keys that would load") {
    StateDict sd = good;
    for (auto& [n, t] : sd) {
      if (n == "fc2.weight") t = zeros({2, 5});
    }
    CHECK_THROWS_WITH(m.load_state_dict(sd), Catch::Contains("size mismatch") && Catch::Contains("fc2.weight") &&
                                                 Catch::Contains("[2, 5]") && Catch::Contains("[2, 4]"));
    // Non-strict loading does not excuse a shape mismatch either.
    CHECK_THROWS_WITH(m.load_state_dict(sd, /*strict=*/false), Catch::Contains("size mismatch"));
  }
  CHECK(snapshot() == before);
}

TEST_CASE("module: non-strict load_state_dict loads what matches and ignores the rest",
          "[nn][module][state_dict]") {
  Block m;
  const std::vector<double> w2 = values_of(m.fc2_->weight());
  StateDict sd = {{"fc1.bias", full({4}, 0.25)}, {"running", full({2}, -1.0)}, {"nonsense", zeros({9})}};
  m.load_state_dict(sd, /*strict=*/false);
  CHECK(values_of(m.fc1_->bias()) == std::vector<double>(4, 0.25));
  CHECK(values_of(m.running_) == std::vector<double>{-1, -1});
  CHECK(values_of(m.fc2_->weight()) == w2);
  // Loading keeps autograd state: the parameter is still a leaf that requires grad.
  CHECK(autograd::requires_grad(m.fc1_->bias()));
  CHECK(autograd::is_leaf(m.fc1_->bias()));
}

TEST_CASE("module: forward pre-hooks and hooks run in order and may rewrite inputs and outputs",
          "[nn][module][hooks]") {
  Linear fc(2, 2, /*bias=*/false);
  set_values(fc.weight(), {1, 0, 0, 1});  // identity
  std::vector<std::string> log;
  const int pre1 = fc.add_forward_pre_hook([&](Module& m, TensorList& in) {
    log.push_back("pre1:" + m.type_name());
    in[0] = autograd::mul(in[0], 2.0);
  });
  fc.add_forward_pre_hook([&](Module&, TensorList& in) {
    log.push_back("pre2");
    in[0] = autograd::add(in[0], 1.0);
  });
  const int post1 = fc.add_forward_hook([&](Module&, const TensorList& in, TensorList& out) {
    log.push_back("post1");
    // The hook sees the rewritten inputs.
    CHECK(values_of(in[0]) == std::vector<double>{3, 5});
    out[0] = autograd::mul(out[0], 10.0);
  });
  fc.add_forward_hook([&](Module&, const TensorList&, TensorList& out) {
    log.push_back("post2");
    out[0] = autograd::add(out[0], 1.0);
  });
  const Tensor x = from_vector<float>({1, 2}, {1, 2});
  CHECK(values_of(fc(x)) == std::vector<double>{31, 51});  // ((x*2+1) * 10) + 1
  CHECK(log == std::vector<std::string>{"pre1:Linear", "pre2", "post1", "post2"});
  // forward() itself bypasses the hooks.
  CHECK(values_of(fc.forward(x)) == std::vector<double>{1, 2});

  fc.remove_hook(pre1);
  fc.remove_hook(post1);
  fc.remove_hook(12345);  // unknown handles are ignored
  log.clear();
  CHECK(values_of(fc(x)) == std::vector<double>{3, 4});
  CHECK(log == std::vector<std::string>{"pre2", "post2"});
}

TEST_CASE("module: a hook may remove itself, and hooks of children run inside the parent's call",
          "[nn][module][hooks]") {
  auto inner = std::make_shared<ReLU>();
  Sequential seq{inner};
  std::vector<std::string> log;
  int self = -1;
  self = inner->add_forward_hook([&](Module& m, const TensorList&, TensorList&) {
    log.push_back("inner");
    m.remove_hook(self);
  });
  seq.add_forward_pre_hook([&](Module&, TensorList&) { log.push_back("outer-pre"); });
  seq.add_forward_hook([&](Module&, const TensorList&, TensorList&) { log.push_back("outer-post"); });
  seq(zeros({1}));
  seq(zeros({1}));
  CHECK(log == std::vector<std::string>{"outer-pre", "inner", "outer-post", "outer-pre", "outer-post"});
}

TEST_CASE("module: apply() visits children before their parent", "[nn][module]") {
  Outer m;
  std::vector<std::string> order;
  m.apply([&](Module& mod) { order.push_back(mod.type_name()); });
  CHECK(order == std::vector<std::string>{"Linear", "ReLU", "Linear", "Block", "Linear", "Dropout", "Sequential",
                                          "Outer"});
  // The usual use: re-initialise every Linear.
  m.apply([](Module& mod) {
    if (auto* fc = dynamic_cast<Linear*>(&mod)) set_values(fc->weight(), std::vector<double>(
                                                     static_cast<size_t>(fc->weight().numel()), 0.5));
  });
  for (double v : values_of(m.block_->fc2_->weight())) CHECK(v == 0.5);
}

TEST_CASE("module: to_string prints like torch", "[nn][module]") {
  Sequential seq{std::make_shared<Linear>(2, 3), std::make_shared<ReLU>(), std::make_shared<Dropout>(0.1),
                 std::make_shared<LayerNorm>(3), std::make_shared<GELU>(), std::make_shared<Sigmoid>(),
                 std::make_shared<Tanh>(), std::make_shared<Linear>(3, 1, false)};
  CHECK(seq.to_string() ==
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Dropout(p=0.1, inplace=False)\n"
        "  (3): LayerNorm((3,), eps=1e-05, elementwise_affine=True)\n"
        "  (4): GELU(approximate='none')\n"
        "  (5): Sigmoid()\n"
        "  (6): Tanh()\n"
        "  (7): Linear(in_features=3, out_features=1, bias=False)\n"
        ")\n");
  Outer outer;
  CHECK(outer.to_string() ==
        "Outer(\n"
        "  (block): Block(\n"
        "    (fc1): Linear(in_features=3, out_features=4, bias=True)\n"
        "    (act): ReLU()\n"
        "    (fc2): Linear(in_features=4, out_features=2, bias=True)\n"
        "  )\n"
        "  (head): Sequential(\n"
        "    (0): Linear(in_features=2, out_features=2, bias=True)\n"
        "    (1): Dropout(p=0.5, inplace=False)\n"
        "  )\n"
        ")\n");
  CHECK(Embedding(10, 3).to_string() == "Embedding(10, 3)\n");
  CHECK(EmbeddingBag(10, 3).to_string() == "EmbeddingBag(10, 3, mode=mean)\n");
  CHECK(EmbeddingBag(10, 3, EmbeddingBagMode::Sum).to_string() == "EmbeddingBag(10, 3, mode=sum)\n");
  CHECK(LayerNorm(Shape{2, 3}, 1e-6, false).to_string() ==
        "LayerNorm((2, 3), eps=1e-06, elementwise_affine=False)\n");
  CHECK(Dropout(1.0).to_string() == "Dropout(p=1.0, inplace=False)\n");
  CHECK(GELU("tanh").to_string() == "GELU(approximate='tanh')\n");
}

}  // namespace
}  // namespace braid::nn
