// More of torch's common_fsdp.py test models, for the parity tests of fsdp_common_models_test.cc:
//
//   NonUniformReqGradNWM  module = Sequential(Linear(8, 4), Sequential(Linear(4, 16), Linear(16, 16)),
//                         Sequential(Linear(16, 4), Linear(4, 8))); units module.1.0, module.1, module.2 and
//                         the root; every parameter frozen but module.2.1's (common_fsdp's req_grad_pattern
//                         r"module\.2.*\.1.*"), so that most ranks' units hold no trainable shard.
//   ModuleWithDelay       a NestedWrappedModule whose forward sleeps after computing (delay_after_loss_ms)
//                         and whose backward sleeps before the gradients reach the reductions
//                         (delay_before_reduction_ms): the timing moves, the numbers must not.
//   DoubleLinear          lin1, lin2 (dim -> dim) and ReLU; forward_many gives relu(lin1 x) and relu(lin2 x),
//                         or only the first (lin2 unused) without use_second_linear.
//   MLPStack              Sequential(MLP(dim, x3), MLP(dim, x4), MLP(dim, x3)) of common_fsdp's MLP (in_proj,
//                         ReLU, out_proj, ReLU), without tensor parallelism.
// Each is built from a seeded generator: equal seeds give equal modules.
#pragma once

#include <chrono>
#include <memory>
#include <regex>
#include <thread>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/variable.h"
#include "nn/container.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "runtime/models/fsdp_models.h"
#include "tensor/random.h"

namespace braid::mp {

using Modules = std::initializer_list<std::shared_ptr<nn::Module>>;

class NonUniformReqGradNWM : public nn::Module {
 public:
  explicit NonUniformReqGradNWM(uint64_t seed) : nn::Module("NonUniformReqGradNWM") {
    Generator gen(seed);
    first = std::make_shared<nn::Linear>(8, 4, true, &gen);
    inner_first = std::make_shared<nn::Linear>(4, 16, true, &gen);
    second = std::make_shared<nn::Sequential>(Modules{inner_first, std::make_shared<nn::Linear>(16, 16, true, &gen)});
    third = std::make_shared<nn::Sequential>(
        Modules{std::make_shared<nn::Linear>(16, 4, true, &gen), std::make_shared<nn::Linear>(4, 8, true, &gen)});
    module = register_module("module", std::make_shared<nn::Sequential>(Modules{first, second, third}));
    const std::regex trainable(R"(module\.2.*\.1.*)");
    for (const auto& [name, p] : named_parameters()) {
      if (!std::regex_match(name, trainable)) autograd::set_requires_grad(p, false);
    }
  }
  Tensor forward(const Tensor& x) override { return (*module)(x); }
  // Bottom-up: module.1.0, module.1, module.2 (then the root).
  std::vector<nn::Module*> wrap_targets() { return {inner_first.get(), second.get(), third.get()}; }

  std::shared_ptr<nn::Sequential> module, second, third;
  std::shared_ptr<nn::Linear> first, inner_first;
};

class ModuleWithDelay : public nn::Module {
 public:
  ModuleWithDelay(uint64_t seed, int delay_after_loss_ms, int delay_before_reduction_ms)
      : nn::Module("ModuleWithDelay"), after_loss_(delay_after_loss_ms), before_reduction_(delay_before_reduction_ms) {
    module = register_module("module", std::make_shared<runtime::NestedWrappedModule>(seed));
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = (*module)(x);
    std::this_thread::sleep_for(std::chrono::milliseconds(after_loss_));
    if (before_reduction_ > 0 && autograd::requires_grad(y)) {
      const int ms = before_reduction_;
      autograd::register_hook(y, [ms](const Tensor&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        return Tensor();  // keep the gradient
      });
    }
    return y;
  }
  std::shared_ptr<runtime::NestedWrappedModule> module;

 private:
  int after_loss_;
  int before_reduction_;
};

class DoubleLinear : public nn::Module {
 public:
  DoubleLinear(int64_t dim, bool use_second_linear, Generator* gen)
      : nn::Module("DoubleLinear"), use_second_linear_(use_second_linear) {
    lin1 = register_module("lin1", std::make_shared<nn::Linear>(dim, dim, true, gen));
    lin2 = register_module("lin2", std::make_shared<nn::Linear>(dim, dim, true, gen));
  }
  nn::TensorList forward_many(const nn::TensorList& in) override {
    if (use_second_linear_) return {autograd::relu((*lin1)(in[0])), autograd::relu((*lin2)(in[0]))};
    return {autograd::relu((*lin1)(in[0]))};
  }
  std::shared_ptr<nn::Linear> lin1, lin2;

 private:
  bool use_second_linear_;
};

// A root that sums DoubleLinear's outputs, so the parity harness sees one tensor.
class DoubleLinearNet : public nn::Module {
 public:
  DoubleLinearNet(uint64_t seed, bool use_second_linear) : nn::Module("DoubleLinearNet") {
    Generator gen(seed);
    double_linear = register_module("double_linear", std::make_shared<DoubleLinear>(8, use_second_linear, &gen));
    head = register_module("head", std::make_shared<nn::Linear>(8, 8, true, &gen));
  }
  Tensor forward(const Tensor& x) override {
    const nn::TensorList outs = (*double_linear)(nn::TensorList{x});
    Tensor h = outs[0];
    for (size_t i = 1; i < outs.size(); ++i) h = autograd::add(h, outs[i]);
    return (*head)(h);
  }
  std::shared_ptr<DoubleLinear> double_linear;
  std::shared_ptr<nn::Linear> head;
};

// common_fsdp's MLP: in_proj (dim -> k dim), ReLU, out_proj (k dim -> dim), ReLU.
class CommonMLP : public nn::Module {
 public:
  CommonMLP(int64_t dim, int64_t multiplier, Generator* gen) : nn::Module("MLP") {
    in_proj = register_module("in_proj", std::make_shared<nn::Linear>(dim, multiplier * dim, true, gen));
    out_proj = register_module("out_proj", std::make_shared<nn::Linear>(multiplier * dim, dim, true, gen));
  }
  Tensor forward(const Tensor& x) override { return autograd::relu((*out_proj)(autograd::relu((*in_proj)(x)))); }
  std::shared_ptr<nn::Linear> in_proj, out_proj;
};

inline std::shared_ptr<nn::Sequential> make_mlp_stack(int64_t dim, uint64_t seed) {
  Generator gen(seed);
  auto a = std::make_shared<CommonMLP>(dim, 3, &gen);
  auto b = std::make_shared<CommonMLP>(dim, 4, &gen);
  auto c = std::make_shared<CommonMLP>(dim, 3, &gen);
  return std::make_shared<nn::Sequential>(Modules{a, b, c});
}

}  // namespace braid::mp
