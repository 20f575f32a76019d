// autograd::checkpoint: gradients equal those of the plain function (with dropout replayed), activations are
// not kept, parameters' gradients take their forward-time edges, and the misuses fail with a message.
#include <catch2/catch.hpp>

#include <string>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "tensor/allocator.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tensor/random.h"
#include "tests/unit/autograd/autograd_test_util.h"

namespace braid::autograd {
namespace {

using testing::random_leaf;

// tanh(x W1) W2 with dropout between, summed: a few saved activations, a random mask, two parameters.
struct Net {
  Tensor w1 = random_leaf({6, 5}, 1);
  Tensor w2 = random_leaf({5, 3}, 2);
  double p = 0.0;
  Generator* gen = nullptr;

  TensorList operator()(const TensorList& in) const {
    Tensor h = autograd::tanh(matmul(in[0], w1));
    h = autograd::dropout(h, p, /*training=*/true, gen);
    return {autograd::matmul(h, w2)};
  }
};

// Loss, gradient of the input and of both weights, with or without checkpointing, from one RNG state.
struct Grads {
  Tensor loss, dx, dw1, dw2;
};
Grads run(const Net& net, bool checkpointed, CheckpointOptions options = {}) {
  manual_seed(7);
  Tensor x = random_leaf({4, 6}, 3);
  TensorList out = checkpointed ? checkpoint(net, {x}, {net.w1, net.w2}, options) : net({x});
  Tensor loss = autograd::sum(autograd::mul(out[0], out[0]));
  zero_grad(net.w1);
  zero_grad(net.w2);
  backward(loss);
  return {loss, grad(x), grad(net.w1), grad(net.w2)};
}

void check_same(const Grads& a, const Grads& b) {
  CHECK(allclose(a.loss, b.loss, 1e-12, 1e-12));
  CHECK(allclose(a.dx, b.dx, 1e-12, 1e-12));
  CHECK(allclose(a.dw1, b.dw1, 1e-12, 1e-12));
  CHECK(allclose(a.dw2, b.dw2, 1e-12, 1e-12));
}

TEST_CASE("checkpoint: gradients equal the plain function's", "[autograd][checkpoint]") {
  Net net;
  const Grads plain = run(net, false);
  const Grads ckpt = run(net, true);
  check_same(plain, ckpt);
}

TEST_CASE("checkpoint: dropout masks are replayed in the recomputation", "[autograd][checkpoint]") {
  Net net;
  net.p = 0.5;
  SECTION("default generator") {
    const Grads plain = run(net, false);
    const uint64_t after_plain = default_generator().next_u64();
    const Grads ckpt = run(net, true);
    // Recomputing does not move the generator: what is drawn next is what follows the forward's draws.
    CHECK(default_generator().next_u64() == after_plain);
    check_same(plain, ckpt);
  }
  SECTION("a generator of its own, listed in the options") {
    Generator gen(11);
    net.gen = &gen;
    gen.manual_seed(11);
    const Grads plain = run(net, false);
    gen.manual_seed(11);
    const Grads ckpt = run(net, true, {.generators = {&gen}});
    check_same(plain, ckpt);
    // Not listed, the recomputation draws other masks: the gradients are then wrong, which is why the
    // option exists.
    gen.manual_seed(11);
    const Grads unreplayed = run(net, true);
    CHECK_FALSE(allclose(plain.dw1, unreplayed.dw1, 1e-6, 1e-6));
  }
}

TEST_CASE("checkpoint: the forward keeps no activations, only its inputs", "[autograd][checkpoint]") {
  // Eight 256-wide tanh layers on a batch of 64: each keeps a 64 KiB activation without checkpointing.
  TensorList ws;
  for (int i = 0; i < 8; ++i) ws.push_back(random_leaf({256, 256}, 10 + i));
  auto deep = [&ws](const TensorList& in) {
    Tensor h = in[0];
    for (const Tensor& w : ws) h = autograd::tanh(matmul(h, w));
    return TensorList{h};
  };
  const Tensor x = random_leaf({64, 256}, 4);
  auto held_after_forward = [&](bool checkpointed) {
    const size_t before = CpuAllocator::instance().stats().allocated_bytes;
    TensorList out = checkpointed ? checkpoint(deep, {x}, ws) : deep({x});
    const size_t held = CpuAllocator::instance().stats().allocated_bytes - before;
    backward(autograd::sum(out[0]));  // both still differentiate
    for (const Tensor& w : ws) zero_grad(w);
    return held;
  };
  const size_t plain = held_after_forward(false);
  const size_t ckpt = held_after_forward(true);
  const size_t activation = 64 * 256 * sizeof(double);
  INFO("plain " << plain << " bytes, checkpointed " << ckpt << " bytes");
  CHECK(plain >= 8 * activation);  // every layer's output is kept (tanh saves it)
  CHECK(ckpt <= 2 * activation);   // the output, and nothing of the layers
}

TEST_CASE("checkpoint: parameter gradients take the edge they had in forward", "[autograd][checkpoint]") {
  // A parameter that is the output of a node while the forward runs (as FSDP makes its parameters), and a
  // leaf again when backward recomputes: the gradient must reach that node.
  Tensor base = random_leaf({3, 3}, 5);
  Tensor w = random_leaf({3, 3}, 6);
  Tensor x = random_leaf({2, 3}, 7);
  Tensor seen_by_node;
  auto owner = std::make_shared<FunctionNode>(
      "Owner", std::vector<Edge>{gradient_edge(base)}, std::vector<SavedTensor>{},
      [&seen_by_node](const TensorList& grads, SavedTensors&) {
        seen_by_node = grads[0];
        return TensorList{grads[0]};
      });
  meta(w)->grad_fn = owner;  // attach, as FSDP's pre-forward does
  TensorList out = checkpoint([&w](const TensorList& in) { return TensorList{autograd::matmul(in[0], w)}; }, {x}, {w});
  meta(w)->grad_fn = nullptr;  // detach, as FSDP's post-forward does
  backward(autograd::sum(out[0]));
  REQUIRE(seen_by_node.defined());
  // d/dw sum(x w) = x^T 1: all of it went to the node (and through it into base), none into w.grad.
  const Tensor expected = autograd::matmul(x.t(), ones({2, 3}, DType::Float64));
  CHECK(allclose(seen_by_node, expected));
  CHECK(allclose(grad(base), expected));
  CHECK_FALSE(grad(w).defined());
}

TEST_CASE("checkpoint: only parameters require grad; hooks run once", "[autograd][checkpoint]") {
  Net net;
  const Tensor x = randn({4, 6}, DType::Float64);  // no grad: the output must still require it
  int hook_calls = 0;
  register_hook(net.w1, [&hook_calls](const Tensor&) {
    ++hook_calls;
    return Tensor();
  });
  TensorList out = checkpoint(net, {x}, {net.w1, net.w2});
  REQUIRE(requires_grad(out[0]));
  CHECK(grad_fn(out[0])->name() == "CheckpointBackward");
  backward(autograd::sum(out[0]));
  CHECK(grad(net.w1).defined());
  CHECK(hook_calls == 1);  // not also in the nested pass
}

TEST_CASE("checkpoint: recomputation is flagged, and grad mode off just runs", "[autograd][checkpoint]") {
  Net net;
  std::vector<bool> flags;
  auto probe = [&](const TensorList& in) {
    flags.push_back(in_checkpoint_recompute());
    return net(in);
  };
  const Tensor x = random_leaf({4, 6}, 8);
  {
    NoGradGuard no_grad;
    TensorList out = checkpoint(probe, {x}, {net.w1, net.w2});
    CHECK_FALSE(requires_grad(out[0]));
  }
  TensorList out = checkpoint(probe, {x}, {net.w1, net.w2});
  CHECK(flags == std::vector<bool>{false, false});
  backward(autograd::sum(out[0]));
  CHECK(flags == std::vector<bool>{false, false, true});
  CHECK_FALSE(in_checkpoint_recompute());
}

TEST_CASE("checkpoint: misuse fails with a message", "[autograd][checkpoint]") {
  Net net;
  const Tensor x = random_leaf({4, 6}, 9);
  SECTION("a parameter that is not listed") {
    TensorList out = checkpoint(net, {x}, {net.w1});
    try {
      backward(autograd::sum(out[0]));
      FAIL("expected an error");
    } catch (const InvalidArgument& e) {
      CHECK_THAT(e.what(), Catch::Contains("neither one of its inputs nor one of the params"));
    }
  }
  SECTION("backward twice") {
    TensorList out = checkpoint(net, {x}, {net.w1, net.w2});
    Tensor loss = autograd::sum(out[0]);
    backward(loss);
    CHECK_THROWS_WITH(backward(loss), Catch::Contains("second time"));
  }
  SECTION("retain_graph recomputes every time") {
    TensorList out = checkpoint(net, {x}, {net.w1, net.w2});
    Tensor loss = autograd::sum(out[0]);
    backward(loss, Tensor(), /*retain_graph=*/true);
    const Tensor once = grad(net.w1).clone();
    backward(loss);
    CHECK(allclose(grad(net.w1), braid::mul(once, 2.0)));
  }
  SECTION("an input changed in place after the forward") {
    Tensor y = braid::add(x, 0.0);
    set_requires_grad(y);
    TensorList out = checkpoint(net, {y}, {net.w1, net.w2});
    y.add_(Scalar(1.0));
    CHECK_THROWS_AS(backward(autograd::sum(out[0])), InvalidArgument);
  }
  SECTION("a function whose shapes change") {
    int calls = 0;
    auto shifty = [&](const TensorList& in) {
      ++calls;
      return TensorList{calls == 1 ? net(in)[0] : braid::autograd::sum(net(in)[0])};
    };
    TensorList out = checkpoint(shifty, {x}, {net.w1, net.w2});
    CHECK_THROWS_WITH(backward(autograd::sum(out[0])), Catch::Contains("must compute the same thing"));
  }
}

}  // namespace
}  // namespace braid::autograd
