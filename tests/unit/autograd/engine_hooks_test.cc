// Execution order of the backward pass, tensor hooks (non-leaf and leaf), post-accumulate-grad hooks and
// final callbacks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "autograd_test_util.h"
#include "tensor/ops/elementwise.h"

namespace braid::autograd {
namespace {

using Catch::Contains;
using testing::leaf;
using testing::values_of;

// Logs the name of the node each time it runs.
void log_runs(const Tensor& t, std::vector<std::string>& log) {
  auto fn = grad_fn(t);
  REQUIRE(fn != nullptr);
  fn->add_post_hook([&log, name = fn->name()](const TensorList&) { log.push_back(name); });
}

void log_accumulation(const Tensor& leaf_tensor, const std::string& name, std::vector<std::string>& log) {
  register_post_accumulate_grad_hook(leaf_tensor, [&log, name](const Tensor&, const Tensor&) { log.push_back(name); });
}

TEST_CASE("autograd: ready nodes run latest-created first", "[autograd][engine][order]") {
  for (bool exp_first : {true, false}) {
    std::vector<std::string> log;
    Tensor x = leaf({0.1, 0.2}, {2});
    log_accumulation(x, "acc", log);
    Tensor a, b;
    if (exp_first) {
      a = autograd::exp(x);
      b = autograd::tanh(x);
    } else {
      b = autograd::tanh(x);
      a = autograd::exp(x);
    }
    Tensor c = autograd::add(a, b);
    Tensor loss = autograd::sum(c);
    for (const Tensor* t : {&a, &b, &c, &loss}) log_runs(*t, log);
    autograd::backward(loss);
    const std::vector<std::string> expected =
        exp_first ? std::vector<std::string>{"SumBackward", "AddBackward", "TanhBackward", "ExpBackward", "acc"}
                  : std::vector<std::string>{"SumBackward", "AddBackward", "ExpBackward", "TanhBackward", "acc"};
    CHECK(log == expected);
  }
}

TEST_CASE("autograd: the order is the same on every run", "[autograd][engine][order]") {
  std::vector<std::vector<std::string>> runs;
  for (int r = 0; r < 5; ++r) {
    std::vector<std::string> log;
    Tensor x = leaf({1, 2}, {2});
    Tensor w1 = leaf({0.5, 0.25}, {2});
    Tensor w2 = leaf({-1, 3}, {2});
    log_accumulation(x, "x", log);
    log_accumulation(w1, "w1", log);
    log_accumulation(w2, "w2", log);
    Tensor h1 = autograd::tanh(autograd::mul(x, w1));
    Tensor h2 = autograd::sigmoid(autograd::mul(x, w2));
    Tensor loss = autograd::sum(autograd::add(autograd::mul(h1, h2), h2));
    autograd::backward(loss);
    runs.push_back(log);
  }
  for (const auto& r : runs) CHECK(r == runs[0]);
}

TEST_CASE("autograd: a leaf's gradient is accumulated as soon as it is ready", "[autograd][engine][order]") {
  // PyTorch gives AccumulateGrad the highest priority, so post-accumulate hooks (DDP's bucket readiness)
  // fire as early as possible, whenever the leaf's accumulator was created.
  std::vector<std::string> log;
  Tensor x = leaf({1, 2}, {2});
  Tensor w = leaf({0.5, 0.25}, {2});
  log_accumulation(x, "acc x", log);
  log_accumulation(w, "acc w", log);
  Tensor old_graph = autograd::mul(x, 5.0);  // keeps x's accumulator (created here) alive
  Tensor a = autograd::exp(w);
  Tensor b = autograd::mul(x, 2.0);
  Tensor loss = autograd::sum(autograd::add(a, b));
  log_runs(a, log);
  log_runs(b, log);
  autograd::backward(loss);
  CHECK(log == std::vector<std::string>{"MulBackward", "acc x", "ExpBackward", "acc w"});
}

TEST_CASE("autograd: tensor hooks see and replace gradients", "[autograd][engine][hooks]") {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = autograd::mul(x, 3.0);
  std::vector<std::string> log;
  Tensor seen;
  register_hook(y, [&](const Tensor& g) {
    log.push_back("first");
    seen = g.clone();
    return braid::mul(g, 2.0);
  });
  register_hook(y, [&](const Tensor& g) {
    log.push_back("second");
    return braid::add(g, 1.0);  // sees the first hook's result
  });
  register_hook(y, [&](const Tensor&) {
    log.push_back("third");
    return Tensor();  // keeps the gradient
  });
  // y is used twice: its hooks run once, on the summed gradient.
  autograd::backward(autograd::add(autograd::sum(y), autograd::sum(autograd::mul(y, 2.0))));
  CHECK(log == std::vector<std::string>{"first", "second", "third"});
  CHECK(values_of(seen) == std::vector<double>{3, 3});
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{21, 21});  // (3*2 + 1) * 3

  Tensor z = autograd::mul(x, 2.0);
  register_hook(z, [](const Tensor&) { return zeros({3}, DType::Float64); });
  CHECK_THROWS_WITH(autograd::backward(autograd::sum(z)), Contains("returned a gradient of shape [3]"));
  CHECK_FALSE(in_backward());  // the failed pass left no state behind
}

TEST_CASE("autograd: leaf hooks run before accumulation", "[autograd][engine][hooks]") {
  Tensor x = leaf({1, 2}, {2});
  std::vector<std::string> log;
  register_hook(x, [&](const Tensor& g) {
    log.push_back("times ten");
    return braid::mul(g, 10.0);
  });
  register_hook(x, [&](const Tensor& g) {
    log.push_back("plus one");
    return braid::add(g, 1.0);
  });
  Tensor accumulated;
  register_post_accumulate_grad_hook(x, [&](const Tensor& param, const Tensor& g) {
    CHECK(param.is_same(x));
    log.push_back("post");
    accumulated = g;
  });
  // x is used twice; the leaf hooks see the sum (2 + 1) once.
  autograd::backward(autograd::sum(autograd::add(autograd::mul(x, 2.0), x)));
  CHECK(log == std::vector<std::string>{"times ten", "plus one", "post"});
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{31, 31});
  CHECK(values_of(accumulated) == std::vector<double>{31, 31});
}

TEST_CASE("autograd: post-accumulate-grad hooks see the accumulated value once per pass", "[autograd][engine][hooks]") {
  Tensor w = leaf({1, 2}, {2});
  std::vector<std::vector<double>> seen;
  register_post_accumulate_grad_hook(w, [&](const Tensor&, const Tensor& g) { seen.push_back(values_of(g)); });
  Tensor loss = autograd::sum(autograd::add(autograd::mul(w, w), autograd::mul(w, 3.0)));  // 2w + 3
  autograd::backward(loss, Tensor(), /*retain_graph=*/true);
  autograd::backward(loss);
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == std::vector<double>{5, 7});
  CHECK(seen[1] == std::vector<double>{10, 14});

  // grad() accumulates nothing, so it fires no post-accumulate hook.
  Tensor loss2 = autograd::sum(autograd::mul(w, w));
  autograd::grad({loss2}, {w});
  CHECK(seen.size() == 2);
  // Nor does a pass that gives the leaf no gradient.
  Tensor other = leaf({1}, {1});
  autograd::backward(autograd::sum(autograd::mul(other, 2.0)));
  CHECK(seen.size() == 2);

  Tensor y = autograd::mul(w, 2.0);
  CHECK_THROWS_WITH(register_post_accumulate_grad_hook(y, [](const Tensor&, const Tensor&) {}),
                    Contains("can only be registered on leaf tensors"));
}

TEST_CASE("autograd: queue_callback runs once after every node", "[autograd][engine][hooks]") {
  CHECK_THROWS_WITH(queue_callback([] {}), Contains("Final callbacks can only be installed during backward pass"));

  Tensor x = leaf({1, 2}, {2});
  Tensor w = leaf({3, 4}, {2});
  std::vector<std::string> log;
  log_accumulation(x, "acc x", log);
  log_accumulation(w, "acc w", log);
  Tensor h = autograd::mul(x, w);
  register_hook(h, [&](const Tensor&) {
    CHECK(in_backward());
    queue_callback([&] {
      log.push_back("callback 1");
      CHECK(in_backward());
      // A callback may queue another; it runs in the same pass.
      queue_callback([&] { log.push_back("callback 2"); });
    });
    return Tensor();
  });
  Tensor loss = autograd::sum(autograd::exp(h));
  log_runs(loss, log);
  autograd::backward(loss, Tensor(), /*retain_graph=*/true);
  REQUIRE(log.size() == 5);
  CHECK(log[0] == "SumBackward");
  CHECK(log[3] == "callback 1");
  CHECK(log[4] == "callback 2");

  // Callbacks belong to one pass: the next pass runs only what it queues itself.
  log.clear();
  autograd::backward(loss);
  CHECK(std::count(log.begin(), log.end(), "callback 1") == 1);
  CHECK(std::count(log.begin(), log.end(), "callback 2") == 1);
  CHECK_FALSE(in_backward());
}

}  // namespace
}  // namespace braid::autograd
