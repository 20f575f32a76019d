// Training proof: a 2-layer MLP learns XOR with the optimizers, deterministically (fixed seed), to a stated
// loss within a stated number of steps, and then classifies all four inputs correctly.
//
// The model is built from parameters and autograd::linear / relu (what nn::Linear does), initialised as
// nn::Linear is: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias.
#include <cmath>
#include <functional>
#include <utility>

#include "autograd/engine.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/nn_ops.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "optim_test_util.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"

using namespace braid;
using namespace braid::nn::optim;
using braid::nn::TensorList;

namespace {

Tensor uniform_param(const Shape& shape, int64_t fan_in) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  Tensor t = braid::sub(braid::mul(rand(shape), 2.0 * bound), bound);
  autograd::set_requires_grad(t);
  return t;
}

struct Mlp {
  Tensor w1, b1, w2, b2;
  Mlp(int64_t in, int64_t hidden, int64_t out)
      : w1(uniform_param({hidden, in}, in)),
        b1(uniform_param({hidden}, in)),
        w2(uniform_param({out, hidden}, hidden)),
        b2(uniform_param({out}, hidden)) {}
  TensorList params() const { return {w1, b1, w2, b2}; }
  Tensor operator()(const Tensor& x) const {
    return autograd::linear(autograd::relu(autograd::linear(x, w1, b1)), w2, b2);
  }
};

const Tensor& xor_inputs() {
  static const Tensor x = from_vector<float>({0, 0, 0, 1, 1, 0, 1, 1}, {4, 2});
  return x;
}

// Trains until the loss is below `target` or `max_steps` ran; returns the steps taken and the last loss.
std::pair<int, double> train(Optimizer& opt, const std::function<Tensor()>& loss_fn, double target, int max_steps) {
  double loss = INFINITY;
  int step = 0;
  while (step < max_steps) {
    opt.zero_grad();
    Tensor l = loss_fn();
    loss = l.item<double>();
    if (loss < target) break;
    autograd::backward(l);
    opt.step();
    ++step;
  }
  return {step, loss};
}

}  // namespace

// Seed 0 reaches the target after 37 steps; 200 leaves room for a different but valid float summation order.
TEST_CASE("train: 2-16-2 MLP learns XOR with Adam and cross-entropy (loss < 0.005 within 200 steps)",
          "[optim][train]") {
  manual_seed(0);
  Mlp mlp(2, 16, 2);
  const Tensor labels = from_vector<int64_t>({0, 1, 1, 0});
  Adam opt(mlp.params(), AdamOptions{.lr = 0.05});
  const auto [steps, loss] =
      train(opt, [&] { return autograd::cross_entropy(mlp(xor_inputs()), labels); }, 0.005, 200);
  INFO("steps " << steps << ", loss " << loss);
  REQUIRE(loss < 0.005);
  REQUIRE(steps <= 200);
  const Tensor predicted = argmax(mlp(xor_inputs()), 1);
  REQUIRE(to_vector<int64_t>(predicted) == std::vector<int64_t>{0, 1, 1, 0});
}

// Seed 1 reaches the target after 35 steps.
TEST_CASE("train: 2-8-1 MLP learns XOR with SGD momentum and MSE (loss < 0.001 within 200 steps)",
          "[optim][train]") {
  manual_seed(1);
  Mlp mlp(2, 8, 1);
  const Tensor targets = from_vector<float>({0, 1, 1, 0}, {4, 1});
  SGD opt(mlp.params(), SGDOptions{.lr = 0.1, .momentum = 0.9});
  const auto [steps, loss] = train(opt, [&] { return autograd::mse_loss(mlp(xor_inputs()), targets); }, 0.001, 200);
  INFO("steps " << steps << ", loss " << loss);
  REQUIRE(loss < 0.001);
  REQUIRE(steps <= 200);
  // Thresholding the regression output at 0.5 gives XOR.
  const auto out = to_vector<float>(mlp(xor_inputs()));
  REQUIRE(out.size() == 4);
  CHECK(out[0] < 0.5f);
  CHECK(out[1] > 0.5f);
  CHECK(out[2] > 0.5f);
  CHECK(out[3] < 0.5f);
}

TEST_CASE("train: the same seed gives the same run", "[optim][train]") {
  auto run = [] {
    manual_seed(3);
    Mlp mlp(2, 8, 2);
    const Tensor labels = from_vector<int64_t>({0, 1, 1, 0});
    AdamW opt(mlp.params(), AdamWOptions{.lr = 0.05});
    for (int i = 0; i < 20; ++i) {
      opt.zero_grad();
      autograd::backward(autograd::cross_entropy(mlp(xor_inputs()), labels));
      opt.step();
    }
    return to_vector<float>(mlp.w1);
  };
  REQUIRE(run() == run());
}
