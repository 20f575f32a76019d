// SGD against hand-computed updates (PyTorch 1.13's rules, see nn/optim/sgd.h), sparse gradients, errors.
#include "nn/optim/sgd.h"

#include "autograd/engine.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "nn/optim/adam.h"
#include "optim_test_util.h"
#include "tensor/compare.h"
#include "tensor/ops/elementwise.h"

using namespace braid;
using namespace braid::nn::optim;
using braid::nn::TensorList;
using namespace braid::nn::optim::testing;

TEST_CASE("SGD: p -= lr * g", "[optim][sgd]") {
  Tensor p = param({1.0, 2.0});
  SGD opt({p}, SGDOptions{.lr = 0.1});
  give_grad(p, {0.5, -1.0});
  opt.step();
  // 1 - 0.1*0.5 = 0.95;  2 - 0.1*(-1) = 2.1
  require_close(p, {0.95, 2.1});
  opt.step();  // .grad is unchanged: the same step again
  require_close(p, {0.9, 2.2});
  CHECK(opt.state(0).empty());  // no momentum, no state
}

TEST_CASE("SGD: momentum buffer starts at the first gradient", "[optim][sgd]") {
  Tensor p = param({1.0});
  SGD opt({p}, SGDOptions{.lr = 0.1, .momentum = 0.9});
  give_grad(p, {1.0});
  opt.step();
  // buf = g = 1 (not 0.9*0 + 1*g with dampening); p = 1 - 0.1*1 = 0.9
  require_close(p, {0.9});
  require_close(opt.state(0).at("momentum_buffer"), {1.0});
  opt.step();
  // buf = 0.9*1 + 1 = 1.9; p = 0.9 - 0.19 = 0.71
  require_close(p, {0.71});
  opt.step();
  // buf = 0.9*1.9 + 1 = 2.71; p = 0.71 - 0.271 = 0.439
  require_close(p, {0.439});
  require_close(opt.state(0).at("momentum_buffer"), {2.71});
}

TEST_CASE("SGD: dampening scales the gradient from the second step on", "[optim][sgd]") {
  Tensor p = param({1.0});
  SGD opt({p}, SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
  give_grad(p, {1.0});
  opt.step();
  // buf = 1 (first step: no dampening); p = 0.9
  require_close(p, {0.9});
  opt.step();
  // buf = 0.9*1 + (1-0.5)*1 = 1.4; p = 0.9 - 0.14 = 0.76
  require_close(p, {0.76});
  opt.step();
  // buf = 0.9*1.4 + 0.5 = 1.76; p = 0.76 - 0.176 = 0.584
  require_close(p, {0.584});
}

TEST_CASE("SGD: nesterov steps along g + momentum * buf", "[optim][sgd]") {
  Tensor p = param({1.0});
  SGD opt({p}, SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  give_grad(p, {1.0});
  opt.step();
  // buf = 1; d = 1 + 0.9*1 = 1.9; p = 1 - 0.19 = 0.81
  require_close(p, {0.81});
  opt.step();
  // buf = 0.9*1 + 1 = 1.9; d = 1 + 0.9*1.9 = 2.71; p = 0.81 - 0.271 = 0.539
  require_close(p, {0.539});
}

TEST_CASE("SGD: weight decay is added to the gradient", "[optim][sgd]") {
  SECTION("without momentum") {
    Tensor p = param({2.0});
    SGD opt({p}, SGDOptions{.lr = 0.1, .weight_decay = 0.1});
    give_grad(p, {1.0});
    opt.step();
    // d = 1 + 0.1*2 = 1.2; p = 2 - 0.12 = 1.88
    require_close(p, {1.88});
    opt.step();
    // d = 1 + 0.1*1.88 = 1.188; p = 1.88 - 0.1188 = 1.7612
    require_close(p, {1.7612});
    // The gradient itself is not changed.
    require_close(autograd::grad(p), {1.0});
  }
  SECTION("with momentum: the buffer holds the decayed gradient") {
    Tensor p = param({2.0});
    SGD opt({p}, SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1});
    give_grad(p, {1.0});
    opt.step();
    // d = 1.2; buf = 1.2; p = 1.88
    require_close(p, {1.88});
    opt.step();
    // d = 1 + 0.188 = 1.188; buf = 0.9*1.2 + 1.188 = 2.268; p = 1.88 - 0.2268 = 1.6532
    require_close(p, {1.6532});
    require_close(opt.state(0).at("momentum_buffer"), {2.268});
  }
}

TEST_CASE("SGD: maximize ascends", "[optim][sgd]") {
  Tensor p = param({1.0, -1.0});
  SGD opt({p}, SGDOptions{.lr = 0.1, .momentum = 0.5, .maximize = true});
  give_grad(p, {1.0, 2.0});
  opt.step();
  // d = -g = [-1, -2]; buf = d; p = p + 0.1*g = [1.1, -0.8]
  require_close(p, {1.1, -0.8});
  opt.step();
  // buf = 0.5*[-1, -2] + [-1, -2] = [-1.5, -3]; p = [1.1 + 0.15, -0.8 + 0.3] = [1.25, -0.5]
  require_close(p, {1.25, -0.5});
}

TEST_CASE("SGD: real gradients, parameters without .grad are skipped, updates are in place", "[optim][sgd]") {
  Tensor w = param({1.0, 2.0, 3.0});
  Tensor unused = param({5.0});
  const Tensor handle = w;  // a module keeps a handle like this one
  SGD opt({w, unused}, SGDOptions{.lr = 0.5});
  // loss = sum(w * w) -> grad 2w = [2, 4, 6]
  Tensor loss = autograd::sum(autograd::mul(w, w));
  autograd::backward(loss);
  const uint64_t version = w.version();
  opt.step();
  // w - 0.5*2w = 0
  require_close(handle, {0.0, 0.0, 0.0});
  CHECK(handle.is_same(opt.params()[0]));
  CHECK(w.version() > version);
  require_close(unused, {5.0});
  CHECK_FALSE(autograd::grad(unused).defined());
  // Updates are not recorded: the parameter is still a leaf.
  CHECK(autograd::is_leaf(w));

  opt.zero_grad();
  CHECK_FALSE(autograd::grad(w).defined());
  give_grad(w, {1.0, 1.0, 1.0});
  opt.zero_grad(/*set_to_none=*/false);
  require_close(autograd::grad(w), {0.0, 0.0, 0.0});
}

TEST_CASE("SGD: float32 parameters stay float32", "[optim][sgd]") {
  Tensor p = from_vector<float>({1.0f, 2.0f});
  autograd::set_requires_grad(p);
  autograd::set_grad(p, from_vector<float>({0.5f, 0.25f}));
  SGD opt({p}, SGDOptions{.lr = 0.1, .momentum = 0.9});
  opt.step();
  CHECK(p.dtype() == DType::Float32);
  CHECK(opt.state(0).at("momentum_buffer").dtype() == DType::Float32);
  // float arithmetic: 1 - 0.1f*0.5f and 2 - 0.1f*0.25f, within float rounding.
  require_close(p, {0.95, 1.975}, 1e-7);
}

// Contiguous parameters take the one-pass momentum step; a transposed view of the same values takes the
// two binary ops. Both must give the same bits, step after step, in float32 and float64.
TEST_CASE("SGD: the one-pass momentum step rounds like the two-op step", "[optim][sgd]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype_name(dtype));
    Generator gen(5);
    const Tensor values = randn({6, 7}, TensorOptions(dtype), &gen);
    Tensor fused = values.clone();
    Tensor strided = values.t().contiguous().t();  // same values, column-major: not contiguous
    REQUIRE_FALSE(strided.is_contiguous());
    autograd::set_requires_grad(fused);
    autograd::set_requires_grad(strided);
    SGD a({fused}, SGDOptions{.lr = 0.037, .momentum = 0.9});
    SGD b({strided}, SGDOptions{.lr = 0.037, .momentum = 0.9});
    for (int step = 0; step < 4; ++step) {
      const Tensor g = randn({6, 7}, TensorOptions(dtype), &gen);
      autograd::set_grad(fused, g.clone());
      autograd::set_grad(strided, g.t().contiguous().t());
      a.step();
      b.step();
      CHECK(equal(fused, strided));
      CHECK(equal(a.state(0).at("momentum_buffer"), b.state(0).at("momentum_buffer")));
    }
  }
}

TEST_CASE("SGD: sparse gradients update only their rows", "[optim][sgd][sparse]") {
  Tensor w = param({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, {5, 3});
  const std::vector<double> before = values_of(w);

  SECTION("hand-made, uncoalesced (row 1 twice)") {
    Tensor indices = from_vector<int64_t>({1, 3, 1}, {1, 3});
    Tensor values = from_vector<double>({1, 1, 1, 2, 2, 2, 10, 20, 30}, {3, 3});
    autograd::set_grad(w, SparseTensor(indices, values, {5, 3}).to_tensor());
    SGD opt({w}, SGDOptions{.lr = 0.1});
    opt.step();
    // row 1 -= 0.1 * ([1,1,1] + [10,20,30]) = [3-1.1, 4-2.1, 5-3.1]; row 3 -= 0.1*[2,2,2]; rows 0, 2, 4 untouched
    require_close(w, {0, 1, 2, 1.9, 1.9, 1.9, 6, 7, 8, 8.8, 9.8, 10.8, 12, 13, 14});
  }
  SECTION("from embedding_bag(sparse=true)") {
    Tensor input = from_vector<int64_t>({1, 4, 1});
    Tensor offsets = from_vector<int64_t>({0, 2});
    Tensor out = autograd::embedding_bag(w, input, offsets, autograd::EmbeddingBagMode::Sum, Tensor(), true);
    autograd::backward(autograd::sum(out));
    REQUIRE(autograd::grad(w).is_sparse());
    SGD opt({w}, SGDOptions{.lr = 0.1});
    opt.step();
    // Each lookup contributes a row of ones: row 1 twice (-0.2), row 4 once (-0.1).
    require_close(w, {0, 1, 2, 2.8, 3.8, 4.8, 6, 7, 8, 9, 10, 11, 11.9, 12.9, 13.9});
  }
  SECTION("a strided parameter takes the row-by-row path with the same result") {
    // w2 is w's transpose viewed back: not contiguous, same logical values.
    Tensor storage = from_vector<double>(before, {5, 3}).t().contiguous();  // [3, 5]
    Tensor w2 = storage.t();                                               // [5, 3], strided
    REQUIRE_FALSE(w2.is_contiguous());
    Tensor indices = from_vector<int64_t>({4, 0}, {1, 2});
    Tensor values = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
    add_sparse_(w2, SparseTensor(indices, values, {5, 3}).to_tensor(), -1.0);
    // row 0 -= [4, 5, 6]; row 4 -= [1, 2, 3]
    require_close(w2, {-4, -4, -4, 3, 4, 5, 6, 7, 8, 9, 10, 11, 11, 11, 11});
  }
  SECTION("maximize adds") {
    Tensor indices = from_vector<int64_t>({2}, {1, 1});
    Tensor values = from_vector<double>({1, 2, 3}, {1, 3});
    autograd::set_grad(w, SparseTensor(indices, values, {5, 3}).to_tensor());
    SGD opt({w}, SGDOptions{.lr = 1.0, .maximize = true});
    opt.step();
    require_close(w, {0, 1, 2, 3, 4, 5, 7, 9, 11, 9, 10, 11, 12, 13, 14});
  }
}

TEST_CASE("SGD: sparse gradients with momentum or weight decay are refused; Adam refuses them",
          "[optim][sgd][sparse]") {
  Tensor w = param({1, 2, 3, 4}, {2, 2});
  Tensor sparse = SparseTensor(from_vector<int64_t>({0}, {1, 1}), from_vector<double>({1, 1}, {1, 2}), {2, 2})
                      .to_tensor();
  autograd::set_grad(w, sparse);
  {
    SGD opt({{"emb.weight", w}}, SGDOptions{.lr = 0.1, .momentum = 0.9});
    REQUIRE_THROWS_WITH(opt.step(), Catch::Contains("SGD does not support momentum with sparse gradients") &&
                                        Catch::Contains("emb.weight"));
  }
  {
    SGD opt({w}, SGDOptions{.lr = 0.1, .weight_decay = 0.01});
    REQUIRE_THROWS_WITH(opt.step(), Catch::Contains("weight_decay with sparse gradients"));
  }
  {
    Adam opt({w});
    REQUIRE_THROWS_WITH(opt.step(), Catch::Contains("Adam does not support sparse gradients, please consider "
                                                    "SparseAdam instead"));
  }
  require_close(w, {1, 2, 3, 4});  // nothing changed
}

TEST_CASE("SGD: invalid options", "[optim][sgd][errors]") {
  Tensor p = param({1.0});
  REQUIRE_THROWS_WITH(SGD({p}, SGDOptions{}), Catch::Contains("learning rate is required"));
  REQUIRE_THROWS_WITH(SGD({p}, SGDOptions{.lr = -0.1}), Catch::Contains("Invalid learning rate: -0.1"));
  REQUIRE_THROWS_WITH(SGD({p}, SGDOptions{.lr = 0.1, .momentum = -1}), Catch::Contains("Invalid momentum value"));
  REQUIRE_THROWS_WITH(SGD({p}, SGDOptions{.lr = 0.1, .weight_decay = -1}),
                      Catch::Contains("Invalid weight_decay value"));
  REQUIRE_THROWS_WITH(SGD({p}, SGDOptions{.lr = 0.1, .nesterov = true}),
                      Catch::Contains("Nesterov momentum requires a momentum and zero dampening"));
  REQUIRE_THROWS_WITH(SGD({p}, SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                      Catch::Contains("Nesterov momentum requires a momentum and zero dampening"));
  SGD opt({p}, SGDOptions{.lr = 0.1});
  REQUIRE_THROWS_WITH(opt.set_lr(-1), Catch::Contains("Invalid learning rate"));
  opt.set_lr(0.5);
  CHECK(opt.lr() == 0.5);
}
