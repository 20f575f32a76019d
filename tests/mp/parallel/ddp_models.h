// Models and helpers the DDP tests share (the models of torch's test_c10d_gloo.py and test_c10d_common.py
// DDP tests: Task for the unused-parameter tests, ParityNet for the parity tests).
#pragma once

#include <memory>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/variable.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "tensor/factory.h"
#include "tensor/random.h"

namespace braid::mp {

// The gloo parity tests' Net: fc1(2->10), fc2(10->50), fc3(50->4), bias-free, ReLU, softmax(dim=1).
class ParityNet : public nn::Module {
 public:
  explicit ParityNet(uint64_t seed, bool with_unused = false) : nn::Module("Net") {
    Generator gen(seed);
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(2, 10, false, &gen));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(10, 50, false, &gen));
    fc3 = register_module("fc3", std::make_shared<nn::Linear>(50, 4, false, &gen));
    if (with_unused) unused = register_module("unused", std::make_shared<nn::Linear>(4, 4, false, &gen));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = autograd::relu(fc1->forward(x));
    h = autograd::relu(fc2->forward(h));
    return autograd::softmax(fc3->forward(h), 1);
  }
  std::shared_ptr<nn::Linear> fc1, fc2, fc3, unused;
};

// torch's Task (test_global_local_unused_params_grad): p = ones(2, 2); forward p + x.
class Task : public nn::Module {
 public:
  Task() : nn::Module("Task") { p = register_parameter("p", ones({2, 2})); }
  Tensor forward(const Tensor& x) override { return autograd::add(p, x); }
  Tensor p;
};

// The parity tests' update: p -= grad; grad = None.
inline void sgd_step(nn::Module& m) {
  autograd::NoGradGuard no_grad;
  for (const auto& p : m.parameters()) {
    const Tensor g = autograd::grad(p);
    if (g.defined()) p.sub_(g);
  }
  m.zero_grad();
}

}  // namespace braid::mp
