// Each layer's forward against hand-computed values, its initialisation, and backward through a model.
#include <catch2/catch.hpp>

#include <cmath>
#include <algorithm>
#include <memory>
#include <numbers>
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
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/normalization.h"
#include "tensor/compare.h"
#include "tests/unit/nn/nn_test_util.h"

namespace braid::nn {
namespace {

using testing::check_close;
using testing::set_values;
using testing::values_of;

// 1-D unless a shape is given (from_vector makes a single value 0-dim).
Tensor indices(const std::vector<int64_t>& v, const Shape& shape = {}) {
  return from_vector(v, shape.empty() ? Shape{static_cast<int64_t>(v.size())} : shape);
}

// --- Linear

TEST_CASE("Linear: forward with set weights, any leading dims", "[nn][linear]") {
  Linear fc(2, 3);
  CHECK(fc.weight().shape() == Shape{3, 2});
  CHECK(fc.bias().shape() == Shape{3});
  set_values(fc.weight(), {1, 2, 3, 4, 5, 6});
  set_values(fc.bias(), {0.5, -1, 0});
  const Tensor x = from_vector<float>({1, 1, 2, -1}, {2, 2});
  const Tensor y = fc(x);
  CHECK(y.shape() == Shape{2, 3});
  check_close(values_of(y), {3.5, 6, 11, 0.5, 1, 4});
  // 1-D input and extra batch dims.
  check_close(values_of(fc(from_vector<float>({1, 1}, {2}))), {3.5, 6, 11});
  const Tensor y3 = fc(x.reshape({1, 2, 2}));
  CHECK(y3.shape() == Shape{1, 2, 3});
  check_close(values_of(y3), {3.5, 6, 11, 0.5, 1, 4});
  CHECK_THROWS_AS(fc(zeros({2, 3})), InvalidArgument);
}

TEST_CASE("Linear: bias=false registers no bias", "[nn][linear]") {
  Linear fc(2, 2, /*bias=*/false);
  CHECK_FALSE(fc.bias().defined());
  CHECK(fc.named_parameters().size() == 1);
  CHECK(fc.named_parameters()[0].first == "weight");
  set_values(fc.weight(), {1, 2, 3, 4});
  check_close(values_of(fc(from_vector<float>({1, -1}, {1, 2}))), {-1, -1});
}

TEST_CASE("Linear: default init is U(-1/sqrt(in), 1/sqrt(in)) for weight and bias", "[nn][linear][init]") {
  Generator gen(1234);
  Linear fc(16, 256, true, &gen);
  const double bound = 0.25;
  for (const Tensor& t : {fc.weight(), fc.bias()}) {
    const auto v = values_of(t);
    double lo = 1, hi = -1, sum = 0, sq = 0;
    for (double x : v) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      sum += x;
      sq += x * x;
    }
    CHECK(lo >= -bound);
    CHECK(hi <= bound);
    // The bound is reached (not e.g. half of it): with >= 256 draws both ends come within 10%.
    CHECK(lo < -0.9 * bound);
    CHECK(hi > 0.9 * bound);
    const double n = static_cast<double>(v.size());
    CHECK(std::abs(sum / n) < 0.05);
    // The variance of U(-b, b) is b^2 / 3.
    CHECK(sq / n == Approx(bound * bound / 3).epsilon(0.25));
  }
  // in_features = 1: bound 1.
  Linear wide(1, 1000, true, &gen);
  double hi = 0;
  for (double x : values_of(wide.weight())) hi = std::max(hi, std::abs(x));
  CHECK(hi > 0.95);
  CHECK(hi <= 1.0);
}

TEST_CASE("init: the same seed gives the same weights, another seed different ones", "[nn][init]") {
  SECTION("explicit generator") {
    Generator g1(7), g2(7), g3(8);
    MLP a({4, 8, 3}, true, &g1), b({4, 8, 3}, true, &g2), c({4, 8, 3}, true, &g3);
    for (auto& [n, t] : a.named_parameters()) {
      CHECK(equal(t, b.parameter(n)));
      CHECK_FALSE(equal(t, c.parameter(n)));
    }
  }
  SECTION("default generator") {
    manual_seed(99);
    Linear a(5, 5);
    Embedding e1(4, 2);
    manual_seed(99);
    Linear b(5, 5);
    Embedding e2(4, 2);
    CHECK(equal(a.weight(), b.weight()));
    CHECK(equal(a.bias(), b.bias()));
    CHECK(equal(e1.weight(), e2.weight()));
    // Two layers from one stream differ from each other.
    CHECK_FALSE(equal(a.weight(), Linear(5, 5).weight()));
  }
  SECTION("reset_parameters re-draws") {
    Generator g1(3), g2(3);
    Linear a(3, 3, true, &g1);
    Linear b(3, 3, true, &g2);
    const Tensor w = a.weight();
    a.reset_parameters(&g1);
    CHECK(a.weight().is_same(w));
    CHECK_FALSE(equal(a.weight(), b.weight()));
    b.reset_parameters(&g2);
    CHECK(equal(a.weight(), b.weight()));
  }
}

TEST_CASE("init: helpers fill in place, keep leaves, bump versions", "[nn][init]") {
  Tensor t = zeros({3, 4, 5, 5});
  autograd::set_requires_grad(t);
  CHECK(init::calculate_fan_in_and_fan_out(t) == std::pair<int64_t, int64_t>{100, 75});
  CHECK_THROWS_WITH(init::calculate_fan_in_and_fan_out(zeros({3})), Catch::Contains("fewer than 2 dimensions"));
  CHECK(init::calculate_gain(init::Nonlinearity::ReLU) == Approx(std::sqrt(2.0)));
  CHECK(init::calculate_gain(init::Nonlinearity::Tanh) == Approx(5.0 / 3.0));
  CHECK(init::calculate_gain(init::Nonlinearity::LeakyReLU, std::sqrt(5.0)) == Approx(std::sqrt(1.0 / 3.0)));

  uint64_t v = t.version();
  init::kaiming_uniform_(t, 0.0, init::FanMode::FanIn, init::Nonlinearity::ReLU);  // bound sqrt(6/100)
  CHECK(t.version() > v);
  CHECK(autograd::is_leaf(t));
  CHECK(autograd::requires_grad(t));
  for (double x : values_of(t)) CHECK(std::abs(x) <= std::sqrt(0.06));
  init::kaiming_uniform_(t, 0.0, init::FanMode::FanOut, init::Nonlinearity::ReLU);  // bound sqrt(6/75)
  double hi = 0;
  for (double x : values_of(t)) hi = std::max(hi, std::abs(x));
  CHECK(hi > std::sqrt(0.06));
  CHECK(hi <= std::sqrt(0.08));

  v = t.version();
  init::zeros_(t);
  CHECK(t.version() > v);
  for (double x : values_of(t)) CHECK(x == 0.0);
  init::ones_(t);
  for (double x : values_of(t)) CHECK(x == 1.0);
  init::constant_(t, 2.5);
  for (double x : values_of(t)) CHECK(x == 2.5);

  Generator gen(5);
  Tensor u = Tensor::empty({10000}, DType::Float64);
  init::uniform_(u, 2.0, 3.0, &gen);
  double lo = 10, top = 0, sum = 0;
  for (double x : values_of(u)) {
    lo = std::min(lo, x);
    top = std::max(top, x);
    sum += x;
  }
  CHECK(lo >= 2.0);
  CHECK(top < 3.0);
  CHECK(sum / 10000 == Approx(2.5).margin(0.02));
  init::normal_(u, -1.0, 2.0, &gen);
  double s = 0, sq = 0;
  for (double x : values_of(u)) {
    s += x;
    sq += x * x;
  }
  const double mean = s / 10000;
  CHECK(mean == Approx(-1.0).margin(0.1));
  CHECK(std::sqrt(sq / 10000 - mean * mean) == Approx(2.0).margin(0.1));

  // Non-contiguous and reduced-precision tensors are filled too; a float16 fill is the rounding of the
  // float64 fill from the same seed.
  Tensor h = Tensor::empty({4, 6}, DType::Float16);
  Tensor d = Tensor::empty({4, 6}, DType::Float64);
  Generator gh(11), gd(11);
  init::uniform_(h, -1, 1, &gh);
  init::uniform_(d, -1, 1, &gd);
  CHECK(equal(h, d.to(DType::Float16)));
  Tensor base = zeros({3, 4});
  init::ones_(base.t());
  for (double x : values_of(base)) CHECK(x == 1.0);
  CHECK_THROWS_WITH(init::uniform_(zeros({2}, DType::Int64)), Catch::Contains("floating"));
  CHECK_THROWS_AS(init::uniform_(zeros({2}), 1.0, 0.0), InvalidArgument);
}

// --- Embedding and EmbeddingBag

// Rows r = [r, 10 r] for r = 0..4, so sums and means can be read off by eye.
void set_rows(const Tensor& weight) { set_values(weight, {0, 0, 1, 10, 2, 20, 3, 30, 4, 40}); }

TEST_CASE("Embedding: N(0, 1) init and lookups of any index shape", "[nn][embedding]") {
  Generator gen(17);
  Embedding big(200, 50, &gen);
  double s = 0, sq = 0;
  for (double x : values_of(big.weight())) {
    s += x;
    sq += x * x;
  }
  CHECK(s / 10000 == Approx(0).margin(0.05));
  CHECK(std::sqrt(sq / 10000) == Approx(1).margin(0.05));

  Embedding emb(5, 2);
  set_rows(emb.weight());
  const Tensor y = emb(indices({0, 2, 4, 4}, {2, 2}));
  CHECK(y.shape() == Shape{2, 2, 2});
  check_close(values_of(y), {0, 0, 2, 20, 4, 40, 4, 40});
  CHECK(emb(indices({3}, {1})).shape() == Shape{1, 2});
  CHECK_THROWS_AS(emb(indices({5})), InvalidArgument);

  autograd::backward(autograd::sum(y));
  check_close(values_of(autograd::grad(emb.weight())), {1, 1, 0, 0, 1, 1, 0, 0, 2, 2});
}

TEST_CASE("EmbeddingBag: sum, mean and max with offsets and empty bags, as PyTorch", "[nn][embedding]") {
  // Bags: {1, 2}, {} , {4, 4, 3}, {} (offsets 0, 2, 2, 5 over 5 indices).
  const Tensor input = indices({1, 2, 4, 4, 3});
  const Tensor offsets = indices({0, 2, 2, 5});
  struct Case {
    EmbeddingBagMode mode;
    std::vector<double> want;
  };
  for (const Case& c : {Case{EmbeddingBagMode::Sum, {3, 30, 0, 0, 11, 110, 0, 0}},
                        Case{EmbeddingBagMode::Mean, {1.5, 15, 0, 0, 11.0 / 3, 110.0 / 3, 0, 0}},
                        Case{EmbeddingBagMode::Max, {2, 20, 0, 0, 4, 40, 0, 0}}}) {
    INFO("mode " << mode_name(c.mode));
    EmbeddingBag bag(5, 2, c.mode);
    set_rows(bag.weight());
    const TensorList out = bag({input, offsets});
    REQUIRE(out.size() == 1);
    CHECK(out[0].shape() == Shape{4, 2});
    check_close(values_of(out[0]), c.want, 1e-5);
  }
}

TEST_CASE("EmbeddingBag: per_sample_weights (sum only) and 2-D fixed-length input", "[nn][embedding]") {
  EmbeddingBag bag(5, 2, EmbeddingBagMode::Sum);
  set_rows(bag.weight());
  const Tensor psw = from_vector<float>({0.5, 2, 1, -1, 3});
  const Tensor y = bag({indices({1, 2, 4, 4, 3}), indices({0, 2}), psw})[0];
  check_close(values_of(y), {4.5, 45, 9, 90});  // 0.5*1 + 2*2; 4 - 4 + 3*3

  // A 2-D input is a batch of bags of equal length; per_sample_weights then has input's shape.
  const Tensor input2d = indices({1, 2, 4, 3}, {2, 2});
  check_close(values_of(bag(input2d)), {3, 30, 7, 70});
  check_close(values_of(bag({input2d, Tensor(), from_vector<float>({1, 0, 2, 1}, {2, 2})})[0]), {1, 10, 11, 110});
  EmbeddingBag mean(5, 2);
  set_rows(mean.weight());
  check_close(values_of(mean(input2d)), {1.5, 15, 3.5, 35});
  // Bags of length 0 give zeros.
  const Tensor none = bag(Tensor::empty({3, 0}, DType::Int64));
  CHECK(none.shape() == Shape{3, 2});
  for (double x : values_of(none)) CHECK(x == 0.0);

  CHECK_THROWS_WITH(mean({indices({1, 2}), indices({0}), from_vector<float>({1, 1})}), Catch::Contains("sum"));
  CHECK_THROWS_WITH(bag(indices({1, 2})), Catch::Contains("offsets has to be a 1D Tensor but got None"));
  CHECK_THROWS_WITH(bag({input2d, indices({0, 1})}), Catch::Contains("offsets has to be None"));
  CHECK_THROWS_AS(bag({indices({1, 2}), indices({0}), from_vector<float>({1}, {1})}), InvalidArgument);
  CHECK_THROWS_AS(bag({indices({1, 9}), indices({0})}), InvalidArgument);
  CHECK_THROWS_AS(EmbeddingBag(5, 2, EmbeddingBagMode::Max, /*sparse=*/true), InvalidArgument);
}

TEST_CASE("EmbeddingBag: dense and sparse=true weight gradients agree", "[nn][embedding][sparse]") {
  Generator g1(5), g2(5);
  EmbeddingBag dense(6, 3, EmbeddingBagMode::Mean, false, &g1);
  EmbeddingBag sparse(6, 3, EmbeddingBagMode::Mean, true, &g2);
  CHECK(sparse.sparse());
  const Tensor input = indices({0, 5, 5, 2, 1});
  const Tensor offsets = indices({0, 3, 3});
  const Tensor go = from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  autograd::backward(dense({input, offsets})[0], go);
  autograd::backward(sparse({input, offsets})[0], go);
  const Tensor gd = autograd::grad(dense.weight());
  const Tensor gs = autograd::grad(sparse.weight());
  CHECK_FALSE(gd.is_sparse());
  REQUIRE(gs.is_sparse());
  CHECK(gs.shape() == Shape{6, 3});
  // One row per looked-up index, uncoalesced, as PyTorch's sparse=True.
  CHECK(as_sparse(gs).nnz() == 5);
  CHECK(to_vector<int64_t>(as_sparse(gs).indices()) == std::vector<int64_t>{0, 5, 5, 2, 1});
  check_close(values_of(gs), values_of(gd));
  // Row 5 appears twice in the first bag of three: 2/3 of that bag's gradient.
  const std::vector<double> dense_rows = values_of(gd);
  check_close(std::vector<double>(dense_rows.begin() + 15, dense_rows.end()), {2.0 / 3, 4.0 / 3, 2});
}

// --- LayerNorm

TEST_CASE("LayerNorm: matches the hand computation, with and without affine", "[nn][layernorm]") {
  LayerNorm ln(4);
  REQUIRE(ln.named_parameters().size() == 2);
  CHECK(ln.named_parameters()[0].first == "weight");
  CHECK(ln.named_parameters()[1].first == "bias");
  for (double x : values_of(ln.weight())) CHECK(x == 1.0);
  for (double x : values_of(ln.bias())) CHECK(x == 0.0);
  const Tensor x = from_vector<double>({1, 2, 3, 4, 2, 2, 2, 2}, {2, 4});
  ln.to(DType::Float64);
  const double r = 1.0 / std::sqrt(1.25 + 1e-5);  // mean 2.5, biased variance 1.25
  check_close(values_of(ln(x)), {-1.5 * r, -0.5 * r, 0.5 * r, 1.5 * r, 0, 0, 0, 0}, 1e-12);
  set_values(ln.weight(), {1, 2, 3, 4});
  set_values(ln.bias(), {0, 0, 0, 1});
  check_close(values_of(ln(x)), {-1.5 * r, -1.0 * r, 1.5 * r, 6 * r + 1, 0, 0, 0, 1}, 1e-12);

  LayerNorm plain(Shape{2, 2}, 0.5, /*elementwise_affine=*/false);
  CHECK(plain.parameters().empty());
  CHECK_FALSE(plain.weight().defined());
  // Over the last two dims of [1, 2, 2]: values 0, 1, 2, 3, mean 1.5, variance 1.25, eps 0.5.
  const double r2 = 1.0 / std::sqrt(1.75);
  check_close(values_of(plain(from_vector<float>({0, 1, 2, 3}, {1, 2, 2}))),
              {-1.5 * r2, -0.5 * r2, 0.5 * r2, 1.5 * r2}, 1e-6);
  CHECK_THROWS_AS(ln(zeros({2, 3}, DType::Float64)), InvalidArgument);
}

// --- Dropout

TEST_CASE("Dropout: identity in eval, in train zeroes about p and scales by 1/(1-p)", "[nn][dropout]") {
  Generator gen(2024);
  Dropout drop(0.3, &gen);
  const Tensor x = ones({100000});
  drop.eval();
  CHECK(equal(drop(x), x));
  drop.train();
  const auto v = values_of(drop(x));
  size_t zeros_seen = 0;
  for (double e : v) {
    if (e == 0.0) {
      ++zeros_seen;
    } else {
      CHECK(e == Approx(1.0 / 0.7).epsilon(1e-6));
    }
  }
  CHECK(static_cast<double>(zeros_seen) / 100000.0 == Approx(0.3).margin(0.01));

  // The mask comes from the module's generator: the same seed gives the same mask.
  Generator g1(9), g2(9);
  Dropout a(0.5, &g1), b(0.5, &g2);
  const Tensor r = randn({64});
  CHECK(equal(a(r), b(r)));

  CHECK(equal(Dropout(0.0)(x), x));
  for (double e : values_of(Dropout(1.0)(ones({10})))) CHECK(e == 0.0);
  CHECK_THROWS_WITH(Dropout(1.5), Catch::Contains("between 0 and 1"));

  // Gradient flows through the kept elements with the same scale.
  Tensor leaf = ones({1000});
  autograd::set_requires_grad(leaf);
  Dropout d(0.5, &gen);
  const Tensor y = d(leaf);
  autograd::backward(autograd::sum(y));
  CHECK(values_of(autograd::grad(leaf)) == values_of(y));
}

// --- activations

TEST_CASE("activations: ReLU, GELU (exact and tanh), Sigmoid, Tanh", "[nn][activation]") {
  const std::vector<double> xs = {-3, -1, -0.5, 0, 0.5, 1, 3};
  const Tensor x = from_vector(xs);
  auto expect = [&](Module&& m, double (*f)(double)) {
    std::vector<double> want;
    for (double v : xs) want.push_back(f(v));
    INFO(m.type_name());
    check_close(values_of(m(x)), want, 1e-12);
  };
  expect(ReLU(), [](double v) { return v > 0 ? v : 0.0; });
  expect(Sigmoid(), [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
  expect(Tanh(), [](double v) { return std::tanh(v); });
  expect(GELU(), [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); });
  expect(GELU("tanh"), [](double v) {
    return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
  });
  CHECK_THROWS_WITH(GELU("fast"), Catch::Contains("approximate"));

  // The tanh approximation's gradient, from its composition, against a central difference.
  Tensor leaf = from_vector<double>({0.7});
  autograd::set_requires_grad(leaf);
  autograd::backward(GELU("tanh")(leaf));
  auto f = [](double v) {
    return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
  };
  CHECK(values_of(autograd::grad(leaf))[0] == Approx((f(0.7 + 1e-6) - f(0.7 - 1e-6)) / 2e-6).epsilon(1e-6));
}

// --- containers and backward

TEST_CASE("Sequential: push_back names children 0, 1, ..., indexing and chaining", "[nn][container]") {
  Sequential seq;
  CHECK(seq.empty());
  const Tensor x = randn({2, 3});
  CHECK(seq(x).is_same(x));  // empty: identity
  auto fc = std::make_shared<Linear>(3, 2);
  seq.push_back(fc);
  seq.push_back(std::make_shared<Tanh>());
  CHECK(seq.size() == 2);
  CHECK(seq[0] == fc);
  CHECK(seq[-1]->type_name() == "Tanh");
  CHECK(seq.child("1")->type_name() == "Tanh");
  CHECK_THROWS_AS(seq[2], InvalidArgument);
  CHECK_THROWS_AS(seq[-3], InvalidArgument);
  std::vector<std::string> names;
  for (auto& [n, t] : seq.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias"});
  CHECK(equal(seq(x), autograd::tanh(fc->forward(x))));
  // Several tensors through a multi-input first layer.
  Sequential bags{std::make_shared<EmbeddingBag>(4, 2, EmbeddingBagMode::Sum), std::make_shared<ReLU>()};
  const TensorList out = bags({indices({0, 1, 3}), indices({0, 1})});
  REQUIRE(out.size() == 1);
  CHECK(out[0].shape() == Shape{2, 2});
}

TEST_CASE("MLP: Linear+ReLU pairs without a final ReLU, named like a torch Sequential", "[nn][container]") {
  MLP mlp({4, 8, 8, 2});
  CHECK(mlp.size() == 5);
  std::vector<std::string> types;
  for (auto& [n, c] : mlp.named_children()) types.push_back(n + ":" + c->type_name());
  CHECK(types == std::vector<std::string>{"0:Linear", "1:ReLU", "2:Linear", "3:ReLU", "4:Linear"});
  std::vector<std::string> names;
  for (auto& [n, t] : mlp.named_parameters()) names.push_back(n + shape_str(t.shape()));
  CHECK(names == std::vector<std::string>{"0.weight[8, 4]", "0.bias[8]", "2.weight[8, 8]", "2.bias[8]",
                                          "4.weight[2, 8]", "4.bias[2]"});
  CHECK(mlp(randn({3, 4})).shape() == Shape{3, 2});
  MLP one({3, 1}, /*bias=*/false);
  CHECK(one.size() == 1);
  CHECK(one.parameters().size() == 1);
  CHECK_THROWS_AS(MLP({4}), InvalidArgument);
  // The final layer is linear: outputs can be negative.
  Generator gen(1);
  MLP lin({2, 2}, true, &gen);
  set_values(std::static_pointer_cast<Linear>(lin[0])->weight(), {-1, 0, 0, -1});
  set_values(std::static_pointer_cast<Linear>(lin[0])->bias(), {0, 0});
  check_close(values_of(lin(from_vector<float>({1, 2}, {1, 2}))), {-1, -2});
}

TEST_CASE("backward through a small model reaches every parameter", "[nn][backward]") {
  Generator gen(31);
  Sequential model{std::make_shared<Linear>(4, 8, true, &gen), std::make_shared<GELU>(),
                   std::make_shared<LayerNorm>(8), std::make_shared<Dropout>(0.1, &gen),
                   std::make_shared<Linear>(8, 3, true, &gen), std::make_shared<Tanh>(),
                   std::make_shared<Linear>(3, 2, true, &gen), std::make_shared<Sigmoid>()};
  const Tensor x = randn({5, 4}, DType::Float32, &gen);
  autograd::backward(autograd::sum(model(x)));
  const auto params = model.named_parameters();
  CHECK(params.size() == 8);
  for (const auto& [n, p] : params) {
    INFO(n);
    const Tensor g = autograd::grad(p);
    REQUIRE(g.defined());
    CHECK(g.shape() == p.shape());
    double norm = 0;
    for (double v : values_of(g)) {
      CHECK(std::isfinite(v));
      norm += v * v;
    }
    CHECK(norm > 0);
  }
  // Linear's gradients by hand: d sum(x W^T + b) / dW = column sums of x per row; / db = batch size.
  Linear fc(2, 3);
  const Tensor in = from_vector<float>({1, 2, 3, 4}, {2, 2});
  autograd::backward(autograd::sum(fc(in)));
  check_close(values_of(autograd::grad(fc.weight())), {4, 6, 4, 6, 4, 6});
  check_close(values_of(autograd::grad(fc.bias())), {2, 2, 2});
  // A second backward accumulates.
  autograd::backward(autograd::sum(fc(in)));
  check_close(values_of(autograd::grad(fc.bias())), {4, 4, 4});
}

}  // namespace
}  // namespace braid::nn
