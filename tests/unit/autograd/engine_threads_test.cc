// Threads and re-entrancy: grad mode is per thread, backward runs on several threads at once (independent
// graphs, or one graph kept with retain_graph), and a hook may start another backward pass.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/reduce.h"
#include "autograd_test_util.h"
#include "tensor/ops/linalg.h"

namespace braid::autograd {
namespace {

using testing::all_close;
using testing::leaf;
using testing::random_leaf;
using testing::values_of;

TEST_CASE("autograd: grad mode is per thread", "[autograd][engine][threads]") {
  Tensor x = leaf({1, 2}, {2});
  NoGradGuard no_grad;
  CHECK_FALSE(requires_grad(autograd::mul(x, 2.0)));
  bool other_enabled = false, other_recorded = false;
  std::thread other([&] {
    other_enabled = GradMode::is_enabled();
    other_recorded = requires_grad(autograd::mul(x, 2.0));
  });
  other.join();
  CHECK(other_enabled);
  CHECK(other_recorded);
  CHECK_FALSE(GradMode::is_enabled());
}

TEST_CASE("autograd: concurrent backward on independent graphs", "[autograd][engine][threads]") {
  constexpr int kThreads = 4, kIters = 25;
  std::vector<std::vector<double>> results(kThreads);
  std::vector<std::vector<double>> expected(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        Tensor w = random_leaf({8, 4}, 100 + t);
        Tensor x = random_leaf({5, 8}, 200 + t);
        for (int i = 0; i < kIters; ++i) {
          Tensor loss = autograd::sum(autograd::tanh(autograd::mm(x, w)));
          autograd::backward(loss);
        }
        results[t] = values_of(autograd::grad(w));
        // d/dw sum(tanh(xw)) = x^T (1 - tanh^2(xw)), accumulated kIters times.
        const Tensor y = braid::tanh(braid::mm(x, w));
        const Tensor dy = braid::sub(ones_like(y), braid::mul(y, y));
        expected[t] = values_of(braid::mul(braid::mm(x.t(), dy), static_cast<double>(kIters)));
      } catch (...) {
        ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  for (int t = 0; t < kThreads; ++t) CHECK(all_close(results[t], expected[t]));
}

TEST_CASE("autograd: concurrent backward through one retained graph", "[autograd][engine][threads]") {
  constexpr int kThreads = 4, kIters = 20;
  Tensor x = leaf({0.1, 0.2, 0.3}, {3});
  Tensor w = leaf({1, -2, 3}, {3});
  Tensor loss = autograd::sum(autograd::mul(autograd::exp(x), w));
  std::atomic<int> post_hooks{0};
  register_post_accumulate_grad_hook(x, [&](const Tensor&, const Tensor&) { ++post_hooks; });
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      try {
        for (int i = 0; i < kIters; ++i) autograd::backward(loss, Tensor(), /*retain_graph=*/true);
      } catch (...) {
        ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  CHECK(post_hooks == kThreads * kIters);
  const auto xs = to_vector<double>(x);
  const auto ws = to_vector<double>(w);
  const auto gx = values_of(autograd::grad(x));
  const auto gw = values_of(autograd::grad(w));
  for (size_t i = 0; i < 3; ++i) {
    CHECK(gx[i] == Approx(kThreads * kIters * std::exp(xs[i]) * ws[i]));
    CHECK(gw[i] == Approx(kThreads * kIters * std::exp(xs[i])));
  }
}

TEST_CASE("autograd: a backward started on another thread while this one runs backward",
          "[autograd][engine][threads]") {
  // The main thread's pass, from inside one of its hooks, starts a second thread that runs backward on the
  // same retained graph; both passes overlap and both gradients land in .grad.
  constexpr int kOtherIters = 10;
  Tensor x = leaf({0.5, -0.5}, {2});
  Tensor h = autograd::tanh(x);
  Tensor loss = autograd::sum(autograd::mul(h, h));
  std::atomic<bool> other_started{false};
  std::atomic<int> failures{0};
  std::thread other;
  bool launched = false;
  register_hook(h, [&](const Tensor&) {
    if (!launched) {
      launched = true;
      other = std::thread([&] {
        other_started = true;
        try {
          for (int i = 0; i < kOtherIters; ++i) autograd::backward(loss, Tensor(), /*retain_graph=*/true);
        } catch (...) {
          ++failures;
        }
      });
      while (!other_started) std::this_thread::yield();
    }
    return Tensor();
  });
  autograd::backward(loss, Tensor(), /*retain_graph=*/true);
  for (int i = 0; i < 5; ++i) autograd::backward(loss, Tensor(), /*retain_graph=*/true);
  other.join();
  CHECK(failures == 0);
  const auto xs = to_vector<double>(x);
  const auto gx = values_of(autograd::grad(x));
  for (size_t i = 0; i < 2; ++i) {
    const double t = std::tanh(xs[i]);
    CHECK(gx[i] == Approx((6 + kOtherIters) * 2 * t * (1 - t * t)));
  }
}

TEST_CASE("autograd: backward started from inside a hook (re-entrant)", "[autograd][engine][threads]") {
  Tensor x = leaf({1, 2}, {2});
  Tensor v = leaf({3, 4}, {2});
  // Graph 2, built before graph 1's pass (hooks run with grad mode off).
  Tensor loss2 = autograd::sum(autograd::mul(v, v));
  Tensor loss1 = autograd::sum(autograd::mul(autograd::exp(x), 2.0));
  std::vector<std::string> log;
  bool nested_done = false;
  register_hook(loss1, [&](const Tensor&) {
    log.push_back("outer hook");
    queue_callback([&] { log.push_back("outer callback"); });
    register_post_accumulate_grad_hook(v, [&](const Tensor&, const Tensor&) {
      queue_callback([&] { log.push_back("nested callback"); });
    });
    autograd::backward(loss2);
    nested_done = true;
    log.push_back("nested returned");
    CHECK(in_backward());  // back in the outer pass
    return Tensor();
  });
  autograd::backward(loss1);
  CHECK(nested_done);
  CHECK(log == std::vector<std::string>{"outer hook", "nested callback", "nested returned", "outer callback"});
  CHECK(values_of(autograd::grad(v)) == std::vector<double>{6, 8});
  const auto gx = values_of(autograd::grad(x));
  CHECK(gx[0] == Approx(2 * std::exp(1.0)));
  CHECK(gx[1] == Approx(2 * std::exp(2.0)));
}

TEST_CASE("autograd: a leaf hook may run backward through the same leaf", "[autograd][engine][threads]") {
  // The nested pass accumulates into the leaf whose hook is running (PyTorch allows this).
  Tensor x = leaf({1, 2}, {2});
  Tensor loss2 = autograd::sum(autograd::mul(x, x));
  Tensor loss1 = autograd::sum(autograd::mul(x, 3.0));
  bool once = false;
  register_hook(x, [&](const Tensor&) {
    if (!once) {
      once = true;
      autograd::backward(loss2);
    }
    return Tensor();
  });
  autograd::backward(loss1);
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{3 + 2, 3 + 4});
}

}  // namespace
}  // namespace braid::autograd
