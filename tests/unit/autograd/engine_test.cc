// The backward engine on single-threaded graphs: leaves and requires_grad, detach, no-grad mode, gradient
// summing (diamonds, multiple roots, shared subgraphs), root checks, retain_graph, grad(), gradient sinks,
// saved-tensor versions and sparse gradients.
#include <catch2/catch.hpp>

#include <map>

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/shape.h"
#include "autograd/accumulate_grad.h"
#include "autograd_test_util.h"
#include "tensor/ops/elementwise.h"

namespace braid::autograd {
namespace {

using Catch::Contains;
using testing::all_close;
using testing::leaf;
using testing::values_of;

TEST_CASE("autograd: leaves, non-leaves and requires_grad", "[autograd][engine]") {
  Tensor x = leaf({1, 2, 3}, {3});
  CHECK(is_leaf(x));
  CHECK(requires_grad(x));
  CHECK(grad_fn(x) == nullptr);

  Tensor y = autograd::mul(x, 2.0);
  CHECK_FALSE(is_leaf(y));
  CHECK(requires_grad(y));
  REQUIRE(grad_fn(y) != nullptr);
  CHECK(grad_fn(y)->name() == "MulBackward");

  // Ops on tensors that do not require grad record nothing: the result is a leaf.
  Tensor c = from_vector<double>({1, 2, 3}, {3});
  Tensor z = autograd::mul(c, 2.0);
  CHECK(is_leaf(z));
  CHECK_FALSE(requires_grad(z));
  CHECK(grad_fn(z) == nullptr);

  // Only leaves get .grad; the non-leaf's stays undefined, as in PyTorch.
  autograd::backward(autograd::sum(y));
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{2, 2, 2});
  CHECK_FALSE(autograd::grad(y).defined());
  CHECK_FALSE(autograd::grad(c).defined());
}

TEST_CASE("autograd: requires_grad errors", "[autograd][engine]") {
  Tensor i = from_vector<int64_t>({1, 2}, {2});
  CHECK_THROWS_WITH(set_requires_grad(i), Contains("only Tensors of floating point dtype can require gradients"));
  CHECK_NOTHROW(set_requires_grad(i, false));  // switching it off is always fine

  Tensor x = leaf({1, 2}, {2});
  Tensor y = autograd::exp(x);
  CHECK_THROWS_WITH(set_requires_grad(y), Contains("you can only change requires_grad flags of leaf variables"));
  CHECK_THROWS_WITH(set_requires_grad(y, false), Contains("ExpBackward"));

  // A tensor that is neither a leaf requiring grad nor has a grad_fn cannot start backward.
  Tensor plain = from_vector<double>({1.0}, {});
  CHECK_THROWS_WITH(autograd::backward(plain), Contains("does not require grad and does not have a grad_fn"));
  CHECK_THROWS_WITH(register_hook(plain, [](const Tensor&) { return Tensor(); }),
                    Contains("doesn't require gradient"));
}

TEST_CASE("autograd: detach shares storage but leaves the graph", "[autograd][engine]") {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor y = autograd::mul(x, 3.0);
  Tensor d = detach(y);
  CHECK(is_leaf(d));
  CHECK_FALSE(requires_grad(d));
  CHECK(d.shares_storage_with(y));
  CHECK(values_of(d) == std::vector<double>{3, 6, 9});
  // Computing with the detached tensor records nothing, and the original keeps its history.
  CHECK_FALSE(requires_grad(autograd::mul(d, 2.0)));
  CHECK(grad_fn(y) != nullptr);
  // Using both: only the path through y carries a gradient.
  autograd::backward(autograd::sum(autograd::add(y, autograd::mul(d, x))));
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{3 + 3, 3 + 6, 3 + 9});
}

TEST_CASE("autograd: NoGradGuard and EnableGradGuard", "[autograd][engine]") {
  Tensor x = leaf({1, 2}, {2});
  REQUIRE(GradMode::is_enabled());
  {
    NoGradGuard no_grad;
    CHECK_FALSE(GradMode::is_enabled());
    Tensor y = autograd::mul(x, 2.0);
    CHECK_FALSE(requires_grad(y));
    CHECK(is_leaf(y));
    {
      EnableGradGuard enable;
      CHECK(requires_grad(autograd::mul(x, 2.0)));
    }
    CHECK_FALSE(GradMode::is_enabled());
  }
  CHECK(GradMode::is_enabled());
  CHECK(requires_grad(autograd::mul(x, 2.0)));
}

TEST_CASE("autograd: a value used twice gets the sum of its gradients (diamond)", "[autograd][engine]") {
  Tensor x = leaf({1, 2, 3}, {3});
  // y = 3x + x*x -> dy/dx = 3 + 2x
  Tensor y = autograd::add(autograd::mul(x, 3.0), autograd::mul(x, x));
  autograd::backward(autograd::sum(y));
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{5, 7, 9});

  // A deeper diamond: h feeds two branches that meet again.
  Tensor w = leaf({0.5, -1.0}, {2});
  Tensor h = autograd::exp(w);
  Tensor out = autograd::mul(autograd::mul(h, 2.0), autograd::sigmoid(h));
  autograd::backward(autograd::sum(out));
  const auto hv = to_vector<double>(h);
  const auto g = values_of(autograd::grad(w));
  for (size_t i = 0; i < 2; ++i) {
    const double s = 1.0 / (1.0 + std::exp(-hv[i]));
    CHECK(g[i] == Approx((2 * s + 2 * hv[i] * s * (1 - s)) * hv[i]));
  }
}

TEST_CASE("autograd: multiple roots with explicit gradients", "[autograd][engine]") {
  Tensor x = leaf({1, 2}, {2});
  Tensor a = autograd::mul(x, 2.0);
  Tensor b = autograd::mul(x, x);
  autograd::backward({a, b}, {from_vector<double>({1, 10}, {2}), from_vector<double>({100, 1000}, {2})});
  // 2*g_a + 2x*g_b
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{2 + 200, 20 + 4000});

  // One root depending on another: the dependent root still waits for its gradient.
  Tensor z = leaf({3}, {1});
  Tensor p = autograd::mul(z, 2.0);
  Tensor q = autograd::mul(p, 5.0);
  autograd::backward({p, q}, {from_vector<double>({1}, {1}), from_vector<double>({1}, {1})});
  CHECK(values_of(autograd::grad(z)) == std::vector<double>{2 + 10});
}

TEST_CASE("autograd: roots on outputs of one node, and one root twice", "[autograd][engine]") {
  Tensor x = leaf({1, 2, 3, 4}, {4});
  auto pieces = autograd::split(autograd::mul(x, 2.0), 1, 0);
  int split_runs = 0;
  grad_fn(pieces[0])->add_post_hook([&](const TensorList&) { ++split_runs; });
  autograd::backward({pieces[3], pieces[0]}, {from_vector<double>({10}, {1}), from_vector<double>({1}, {1})});
  CHECK(split_runs == 1);
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{2, 0, 0, 20});
  // A hook on one piece sees only that piece's gradient.
  Tensor seen;
  register_hook(pieces[1], [&](const Tensor& g) {
    seen = g.clone();
    return braid::mul(g, 3.0);
  });
  zero_grad(x);
  autograd::backward({pieces[1], pieces[2]}, {from_vector<double>({5}, {1}), from_vector<double>({7}, {1})});
  CHECK(values_of(seen) == std::vector<double>{5});
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{0, 30, 14, 0});

  Tensor w = leaf({1, 2}, {2});
  Tensor y = autograd::mul(w, w);
  autograd::backward({y, y}, {from_vector<double>({1, 1}, {2}), from_vector<double>({2, 2}, {2})});
  CHECK(values_of(autograd::grad(w)) == std::vector<double>{6, 12});
}

TEST_CASE("autograd: an op that returns its input unchanged still records", "[autograd][engine]") {
  // contiguous() of a contiguous tensor and to() of the same dtype hand back the input's handle; the
  // result must be a fresh non-leaf and the input must stay a leaf.
  Tensor x = leaf({1, 2}, {2});
  Tensor c = autograd::contiguous(x);
  Tensor t = autograd::to(x, DType::Float64);
  CHECK(is_leaf(x));
  CHECK_FALSE(is_leaf(c));
  CHECK_FALSE(is_leaf(t));
  CHECK(c.shares_storage_with(x));
  autograd::backward(autograd::sum(autograd::add(autograd::mul(c, 2.0), t)));
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{3, 3});
}

TEST_CASE("autograd: the graph is freed with its outputs", "[autograd][engine]") {
  Tensor x = leaf({1, 2}, {2});
  std::weak_ptr<Node> exp_node, acc_node;
  {
    Tensor e = autograd::exp(x);  // saves its own output: must not keep itself alive
    Tensor loss = autograd::sum(autograd::mul(e, x));
    exp_node = grad_fn(e);
    acc_node = gradient_edge(x).function;
    CHECK_FALSE(exp_node.expired());
  }
  CHECK(exp_node.expired());
  CHECK(acc_node.expired());
}

TEST_CASE("autograd: a shared subgraph runs once per backward", "[autograd][engine]") {
  Tensor x = leaf({0.1, 0.2}, {2});
  Tensor h = autograd::exp(x);
  int runs = 0;
  grad_fn(h)->add_post_hook([&](const TensorList&) { ++runs; });
  Tensor a = autograd::sum(autograd::mul(h, 2.0));
  Tensor b = autograd::sum(autograd::mul(h, 3.0));
  autograd::backward({a, b});
  CHECK(runs == 1);
  const auto g = values_of(autograd::grad(x));
  CHECK(g[0] == Approx(5 * std::exp(0.1)));
  CHECK(g[1] == Approx(5 * std::exp(0.2)));
}

TEST_CASE("autograd: root gradient checks", "[autograd][engine]") {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor y = autograd::mul(x, 2.0);
  CHECK_THROWS_WITH(autograd::backward(y), Contains("grad can be implicitly created only for scalar outputs"));
  CHECK_THROWS_WITH(autograd::backward(y, from_vector<double>({1, 1}, {2})), Contains("Mismatch in shape"));
  CHECK_THROWS_WITH(autograd::backward({y}, {Tensor(), Tensor()}), Contains("got 1 tensors but 2 gradients"));
  // A one-element non-0-dim output gets an implicit gradient of one.
  Tensor one = leaf({4}, {1, 1});
  autograd::backward(autograd::mul(one, one));
  CHECK(values_of(autograd::grad(one)) == std::vector<double>{8});
  // A leaf can be a root itself.
  autograd::backward(x, from_vector<double>({1, 2, 3}, {3}));
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{1, 2, 3});
}

TEST_CASE("autograd: backward twice needs retain_graph", "[autograd][engine]") {
  Tensor x = leaf({1, 2}, {2});
  Tensor w = leaf({3, 4}, {2});
  Tensor loss = autograd::sum(autograd::mul(x, w));
  autograd::backward(loss);
  CHECK_THROWS_WITH(autograd::backward(loss), Contains("Trying to backward through the graph a second time") &&
                                                  Contains("MulBackward"));

  Tensor loss2 = autograd::sum(autograd::mul(x, w));
  zero_grad(x);
  autograd::backward(loss2, Tensor(), /*retain_graph=*/true);
  autograd::backward(loss2, Tensor(), /*retain_graph=*/true);
  autograd::backward(loss2);  // the last one may free the graph
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{9, 12});
  CHECK_THROWS_WITH(autograd::backward(loss2), Contains("second time"));

  // Nodes that saved nothing can run again, as in PyTorch (only freed saved tensors are an error).
  Tensor v = leaf({1, 2}, {2});
  Tensor s = autograd::sum(autograd::mul(autograd::add(v, 1.0), 2.0));
  autograd::backward(s);
  autograd::backward(s);
  CHECK(values_of(autograd::grad(v)) == std::vector<double>{4, 4});
}

TEST_CASE("autograd: grad() returns gradients without touching .grad", "[autograd][engine]") {
  Tensor x = leaf({1, 2}, {2});
  Tensor w = leaf({3, 4}, {2});
  Tensor unused = leaf({5}, {1});
  Tensor loss = autograd::sum(autograd::mul(x, w));

  TensorList g = autograd::grad({loss}, {x, w}, {}, /*retain_graph=*/true);
  REQUIRE(g.size() == 2);
  CHECK(values_of(g[0]) == std::vector<double>{3, 4});
  CHECK(values_of(g[1]) == std::vector<double>{1, 2});
  CHECK_FALSE(autograd::grad(x).defined());
  CHECK_FALSE(autograd::grad(w).defined());

  // Only some inputs: the others' gradients go nowhere.
  g = autograd::grad({loss}, {w}, {}, /*retain_graph=*/true);
  CHECK(values_of(g[0]) == std::vector<double>{1, 2});
  CHECK_FALSE(autograd::grad(x).defined());

  CHECK_THROWS_WITH(autograd::grad({loss}, {x, unused}, {}, /*retain_graph=*/true),
                    Contains("appears to not have been used in the graph"));
  g = autograd::grad({loss}, {x, unused}, {}, /*retain_graph=*/true, /*allow_unused=*/true);
  CHECK(values_of(g[0]) == std::vector<double>{3, 4});
  CHECK_FALSE(g[1].defined());

  // Inputs must be leaves that require grad.
  Tensor y = autograd::mul(x, w);
  CHECK_THROWS_WITH(autograd::grad({loss}, {y}, {}, true), Contains("must be a leaf tensor that requires grad"));
  // The returned gradient is its own buffer, not aliasing anything the caller holds.
  Tensor root_grad = from_vector<double>({7, 7}, {2});
  g = autograd::grad({autograd::add(x, 1.0)}, {x}, {root_grad});
  g[0].mul_(2.0);
  CHECK(values_of(root_grad) == std::vector<double>{7, 7});
}

TEST_CASE("autograd: .grad accumulates in place into an assigned buffer", "[autograd][engine]") {
  // DDP points .grad at a slice of a flat bucket; accumulation must write through it, not replace it.
  Tensor bucket = zeros({5}, DType::Float64);
  Tensor x = leaf({1, 2}, {2});
  set_grad(x, bucket.narrow(0, 1, 2));
  autograd::backward(autograd::sum(autograd::mul(x, 3.0)));
  CHECK(values_of(bucket) == std::vector<double>{0, 3, 3, 0, 0});
  CHECK(autograd::grad(x).shares_storage_with(bucket));
  zero_grad(x, /*set_to_none=*/false);
  CHECK(values_of(bucket) == std::vector<double>{0, 0, 0, 0, 0});
  autograd::backward(autograd::sum(autograd::mul(x, x)));
  CHECK(values_of(bucket) == std::vector<double>{0, 2, 4, 0, 0});
  zero_grad(x);
  CHECK_FALSE(autograd::grad(x).defined());
  // The first accumulation owns its buffer: changing the root gradient later does not change .grad.
  Tensor root_grad = from_vector<double>({1, 1}, {2});
  autograd::backward(x, root_grad);
  root_grad.mul_(5.0);
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{1, 1});
  CHECK_THROWS_WITH(set_grad(x, zeros({3}, DType::Float64)), Contains("does not match"));
}

TEST_CASE("autograd: a leaf's gradient has the leaf's dtype", "[autograd][engine]") {
  Tensor x = from_vector<float>({1, 2}, {2});
  set_requires_grad(x);
  const Tensor y = from_vector<double>({3, 4}, {2});
  Tensor loss = autograd::sum(autograd::mul(x, y));  // promoted to float64
  REQUIRE(loss.dtype() == DType::Float64);
  TensorList g = autograd::grad({loss}, {x}, {}, /*retain_graph=*/true);
  CHECK(g[0].dtype() == DType::Float32);
  CHECK(values_of(g[0]) == std::vector<double>{3, 4});
  autograd::backward(loss);
  CHECK(autograd::grad(x).dtype() == DType::Float32);
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{3, 4});
}

// A sink that keeps gradients in a map, as distributed autograd keeps them in its context.
class MapSink final : public GradSink {
 public:
  Tensor accumulate(const Tensor& leaf, const Tensor& g) override {
    ++calls;
    Tensor& slot = grads[leaf.unsafe_impl()];
    slot = slot.defined() ? add_maybe_sparse(slot, g) : g.clone();
    return slot;
  }
  std::map<const TensorImpl*, Tensor> grads;
  int calls = 0;
};

TEST_CASE("autograd: a GradSink receives leaf gradients instead of .grad", "[autograd][engine]") {
  Tensor x = leaf({1, 2}, {2});
  Tensor w = leaf({3, 4}, {2});
  MapSink sink;
  GradSink* seen_in_hook = nullptr;
  Tensor seen_total;
  register_post_accumulate_grad_hook(x, [&](const Tensor&, const Tensor& total) {
    seen_in_hook = current_grad_sink();
    seen_total = total;
  });
  Tensor loss = autograd::sum(autograd::mul(autograd::mul(x, w), x));  // x*x*w
  autograd::backward({loss}, {}, /*retain_graph=*/true, &sink);
  CHECK_FALSE(autograd::grad(x).defined());
  CHECK_FALSE(autograd::grad(w).defined());
  CHECK(sink.calls == 2);  // once per leaf: x's two paths are summed before accumulation
  CHECK(values_of(sink.grads.at(x.unsafe_impl())) == std::vector<double>{6, 16});
  CHECK(values_of(sink.grads.at(w.unsafe_impl())) == std::vector<double>{1, 4});
  CHECK(seen_in_hook == &sink);
  CHECK(values_of(seen_total) == std::vector<double>{6, 16});
  CHECK(current_grad_sink() == nullptr);
  CHECK_FALSE(in_backward());

  // The next pass without a sink writes .grad again.
  autograd::backward(loss);
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{6, 16});
}

TEST_CASE("autograd: modifying a saved tensor in place is detected", "[autograd][engine]") {
  Tensor x = leaf({1, 2}, {2});
  Tensor w = leaf({3, 4}, {2});
  Tensor y = autograd::mul(x, w);
  x.mul_(2.0);  // a raw in-place op: bumps the version of x's storage
  CHECK_THROWS_WITH(autograd::backward(autograd::sum(y)),
                    Contains("modified by an inplace operation") && Contains("MulBackward") &&
                        Contains("is at version 1; expected version 0"));

  // A saved output is checked as well.
  Tensor a = leaf({0.5}, {1});
  Tensor e = autograd::exp(a);
  Tensor s = autograd::sum(e);
  e.add_(1.0);
  CHECK_THROWS_WITH(autograd::backward(s), Contains("ExpBackward"));

  // Changing a tensor that no rule saved is fine.
  Tensor b = leaf({1, 2}, {2});
  Tensor c = autograd::add(b, 1.0);
  b.mul_(3.0);
  autograd::backward(autograd::sum(c));
  CHECK(values_of(autograd::grad(b)) == std::vector<double>{1, 1});
}

TEST_CASE("autograd: sparse embedding_bag gradients", "[autograd][engine][sparse]") {
  Generator gen(7);
  Tensor w_dense = randn({6, 3}, DType::Float64, &gen);
  Tensor w_sparse = w_dense.clone();
  set_requires_grad(w_dense);
  set_requires_grad(w_sparse);
  const Tensor input = from_vector<int64_t>({1, 4, 1, 5, 0}, {5});
  const Tensor offsets = from_vector<int64_t>({0, 2, 2}, {3});  // the middle bag is empty
  const Tensor go = randn({3, 3}, DType::Float64, &gen);

  for (auto mode : {EmbeddingBagMode::Sum, EmbeddingBagMode::Mean}) {
    zero_grad(w_dense);
    zero_grad(w_sparse);
    Tensor dense_out = embedding_bag(w_dense, input, offsets, mode);
    Tensor sparse_out = embedding_bag(w_sparse, input, offsets, mode, Tensor(), /*sparse=*/true);
    CHECK(values_of(dense_out) == values_of(sparse_out));
    autograd::backward(dense_out, go);
    autograd::backward(sparse_out, go, /*retain_graph=*/true);
    const Tensor gd = autograd::grad(w_dense);
    const Tensor gs = autograd::grad(w_sparse);
    CHECK_FALSE(gd.is_sparse());
    REQUIRE(gs.is_sparse());
    CHECK(gs.shape() == w_sparse.shape());
    CHECK(all_close(values_of(gs), values_of(gd)));

    // A second pass accumulates sparse + sparse and stays sparse.
    autograd::backward(sparse_out, go);
    const Tensor gs2 = autograd::grad(w_sparse);
    REQUIRE(gs2.is_sparse());
    std::vector<double> twice = values_of(gd);
    for (double& v : twice) v *= 2;
    CHECK(all_close(values_of(gs2), twice));
  }

  // Per-sample weights: the weight's gradient is sparse, the weights' own gradient dense.
  zero_grad(w_dense);
  zero_grad(w_sparse);
  Tensor psw_d = testing::leaf({0.5, -1, 2, 3, 1.5}, {5});
  Tensor psw_s = testing::leaf({0.5, -1, 2, 3, 1.5}, {5});
  autograd::backward(embedding_bag(w_dense, input, offsets, EmbeddingBagMode::Sum, psw_d), go);
  autograd::backward(embedding_bag(w_sparse, input, offsets, EmbeddingBagMode::Sum, psw_s, true), go);
  REQUIRE(autograd::grad(w_sparse).is_sparse());
  CHECK(all_close(values_of(autograd::grad(w_sparse)), values_of(autograd::grad(w_dense))));
  CHECK(all_close(values_of(autograd::grad(psw_s)), values_of(autograd::grad(psw_d))));

  // Sparse gradients through grad() and into a dense .grad.
  TensorList g = autograd::grad({autograd::sum(embedding_bag(w_sparse, input, offsets, EmbeddingBagMode::Sum,
                                                             Tensor(), true))},
                                {w_sparse});
  CHECK(g[0].is_sparse());
  set_grad(w_sparse, zeros({6, 3}, DType::Float64));
  autograd::backward(autograd::sum(embedding_bag(w_sparse, input, offsets, EmbeddingBagMode::Sum, Tensor(), true)));
  CHECK_FALSE(autograd::grad(w_sparse).is_sparse());
  CHECK(all_close(values_of(autograd::grad(w_sparse)), values_of(g[0])));

  CHECK_THROWS_WITH(embedding_bag(w_sparse, input, offsets, EmbeddingBagMode::Max, Tensor(), true),
                    Contains("not supported with mode max"));
}

}  // namespace
}  // namespace braid::autograd
