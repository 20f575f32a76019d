// Gradchecks of the neural-network functions: softmax family, losses (every reduction), layer_norm,
// dropout with a fixed generator, embedding and embedding_bag (every mode, empty bags, per-sample weights).
#include <catch2/catch.hpp>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/shape.h"
#include "autograd_test_util.h"

namespace braid::autograd {
namespace {

using testing::Fn;
using Catch::Contains;
using testing::all_close;
using testing::leaf;
using testing::positive_leaf;
using testing::random_leaf;
using testing::stepped_leaf;
using testing::transposed_leaf;
using testing::values_of;

TEST_CASE("gradcheck: softmax and log_softmax", "[autograd][gradcheck][nn]") {
  for (int64_t dim : {0, 1, -1}) {
    INFO("dim " << dim);
    const Fn sm = [dim](const std::vector<Tensor>& in) { return autograd::softmax(in[0], dim); };
    const Fn lsm = [dim](const std::vector<Tensor>& in) { return autograd::log_softmax(in[0], dim); };
    REQUIRE_GRADCHECK(sm, random_leaf({3, 4}, 1));
    REQUIRE_GRADCHECK(lsm, random_leaf({3, 4}, 2));
    REQUIRE_GRADCHECK(sm, transposed_leaf(3, 4, 3));
    REQUIRE_GRADCHECK(lsm, stepped_leaf({3, 4}, 4));
  }
  const Fn sm3 = [](const std::vector<Tensor>& in) { return autograd::softmax(in[0], 1); };
  REQUIRE_GRADCHECK(sm3, random_leaf({2, 3, 2}, 5));
}

TEST_CASE("gradcheck: nll_loss and cross_entropy", "[autograd][gradcheck][nn]") {
  const Tensor target = from_vector<int64_t>({2, 0, 3, 2}, {4});
  for (auto reduction : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    INFO("reduction " << static_cast<int>(reduction));
    const Fn nll = [&, reduction](const std::vector<Tensor>& in) {
      return autograd::nll_loss(autograd::log_softmax(in[0], 1), target, reduction);
    };
    const Fn nll_raw = [&, reduction](const std::vector<Tensor>& in) {
      return autograd::nll_loss(in[0], target, reduction);
    };
    const Fn ce = [&, reduction](const std::vector<Tensor>& in) {
      return autograd::cross_entropy(in[0], target, reduction);
    };
    REQUIRE_GRADCHECK(nll, random_leaf({4, 5}, 6));
    REQUIRE_GRADCHECK(nll_raw, random_leaf({4, 5}, 7));
    REQUIRE_GRADCHECK(ce, random_leaf({4, 5}, 8));
    REQUIRE_GRADCHECK(ce, transposed_leaf(4, 5, 9));
    REQUIRE_GRADCHECK(nll_raw, stepped_leaf({4, 5}, 10));
  }
  // int32 targets work too.
  const Tensor target32 = from_vector<int32_t>({1, 0}, {2});
  const Fn ce32 = [&](const std::vector<Tensor>& in) { return autograd::cross_entropy(in[0], target32); };
  REQUIRE_GRADCHECK(ce32, random_leaf({2, 3}, 11));
  CHECK_THROWS_WITH(autograd::nll_loss(random_leaf({2, 3}, 12), from_vector<int64_t>({0, 3}, {2})),
                    Contains("out of bounds"));
  // The value: mean of -log p[target].
  Tensor logits = leaf({0, 0, 0, 0, 0, 0}, {2, 3});
  CHECK(autograd::cross_entropy(logits, target32).item<double>() == Approx(std::log(3.0)));
}

TEST_CASE("gradcheck: mse_loss", "[autograd][gradcheck][nn]") {
  for (auto reduction : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    INFO("reduction " << static_cast<int>(reduction));
    const Fn fn = [reduction](const std::vector<Tensor>& in) { return autograd::mse_loss(in[0], in[1], reduction); };
    REQUIRE_GRADCHECK(fn, random_leaf({3, 2}, 13), random_leaf({3, 2}, 14));
    REQUIRE_GRADCHECK(fn, transposed_leaf(3, 2, 15), stepped_leaf({3, 2}, 16));
  }
}

TEST_CASE("gradcheck: layer_norm", "[autograd][gradcheck][nn]") {
  const Fn plain = [](const std::vector<Tensor>& in) { return autograd::layer_norm(in[0], {4}); };
  const Fn affine = [](const std::vector<Tensor>& in) { return autograd::layer_norm(in[0], {4}, in[1], in[2]); };
  const Fn weight_only = [](const std::vector<Tensor>& in) { return autograd::layer_norm(in[0], {4}, in[1]); };
  const Fn two_dims = [](const std::vector<Tensor>& in) { return autograd::layer_norm(in[0], {2, 3}, in[1], in[2]); };
  REQUIRE_GRADCHECK(plain, random_leaf({3, 4}, 17));
  REQUIRE_GRADCHECK(plain, transposed_leaf(3, 4, 18));
  REQUIRE_GRADCHECK(affine, random_leaf({2, 3, 4}, 19), random_leaf({4}, 20), random_leaf({4}, 21));
  REQUIRE_GRADCHECK(affine, stepped_leaf({3, 4}, 22), stepped_leaf({4}, 23), random_leaf({4}, 24));
  REQUIRE_GRADCHECK(weight_only, random_leaf({3, 4}, 25), random_leaf({4}, 26));
  REQUIRE_GRADCHECK(two_dims, random_leaf({2, 2, 3}, 27), random_leaf({2, 3}, 28), random_leaf({2, 3}, 29));
  CHECK_THROWS_WITH(autograd::layer_norm(random_leaf({3, 4}, 30), {3}), Contains("normalized_shape"));
}

TEST_CASE("gradcheck: dropout with a fixed generator", "[autograd][gradcheck][nn]") {
  for (double p : {0.0, 0.3, 0.7, 1.0}) {
    INFO("p " << p);
    const Fn fn = [p](const std::vector<Tensor>& in) {
      Generator gen(1234);  // the same mask on every call
      return autograd::dropout(in[0], p, /*training=*/true, &gen);
    };
    REQUIRE_GRADCHECK(fn, random_leaf({4, 5}, 31));
    REQUIRE_GRADCHECK(fn, transposed_leaf(4, 5, 32));
  }
  const Fn eval = [](const std::vector<Tensor>& in) {
    return autograd::mul(autograd::dropout(in[0], 0.5, /*training=*/false), 2.0);
  };
  REQUIRE_GRADCHECK(eval, random_leaf({3}, 33));
  // Kept elements are scaled by 1/(1-p); the gradient is the same mask.
  Tensor x = leaf(std::vector<double>(100, 1.0), {100});
  Generator gen(5);
  Tensor y = autograd::dropout(x, 0.25, true, &gen);
  autograd::backward(autograd::sum(y));
  const auto yv = values_of(y);
  const auto gv = values_of(autograd::grad(x));
  int kept = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    CHECK((yv[i] == 0.0 || yv[i] == Approx(1 / 0.75)));
    CHECK(gv[i] == yv[i]);
    kept += yv[i] != 0.0;
  }
  CHECK(kept > 50);
  CHECK(kept < 95);
  CHECK_THROWS_WITH(autograd::dropout(x, 1.5, true), Contains("between 0 and 1"));
}

TEST_CASE("gradcheck: embedding", "[autograd][gradcheck][nn]") {
  const Tensor indices = from_vector<int64_t>({3, 0, 3, 1, 3, 0}, {2, 3});
  const Fn fn = [&](const std::vector<Tensor>& in) { return autograd::embedding(in[0], indices); };
  REQUIRE_GRADCHECK(fn, random_leaf({4, 2}, 34));
  REQUIRE_GRADCHECK(fn, transposed_leaf(4, 2, 35));
  Tensor w = random_leaf({4, 2}, 36);
  CHECK(autograd::embedding(w, indices).shape() == Shape{2, 3, 2});
  CHECK(autograd::embedding(w, from_vector<int64_t>({2}, {})).shape() == Shape{2});
  // Rows looked up several times get the sum.
  autograd::backward(autograd::sum(autograd::embedding(w, indices)));
  CHECK(values_of(autograd::grad(w)) == std::vector<double>{2, 2, 1, 1, 0, 0, 3, 3});
}

TEST_CASE("gradcheck: embedding_bag", "[autograd][gradcheck][nn]") {
  const Tensor input = from_vector<int64_t>({1, 4, 1, 0, 2, 4, 3}, {7});
  const Tensor offsets = from_vector<int64_t>({0, 3, 3, 5}, {4});  // bag 1 is empty
  for (auto mode : {EmbeddingBagMode::Sum, EmbeddingBagMode::Mean, EmbeddingBagMode::Max}) {
    INFO("mode " << static_cast<int>(mode));
    const Fn fn = [&, mode](const std::vector<Tensor>& in) { return embedding_bag(in[0], input, offsets, mode); };
    REQUIRE_GRADCHECK(fn, random_leaf({5, 3}, 37));
    REQUIRE_GRADCHECK(fn, transposed_leaf(5, 3, 38));
    Tensor w = random_leaf({5, 3}, 39);
    const auto out = values_of(embedding_bag(w, input, offsets, mode));
    CHECK(out.size() == 12);
    CHECK(out[3] == 0.0);  // the empty bag
    CHECK(out[4] == 0.0);
    CHECK(out[5] == 0.0);
    if (mode != EmbeddingBagMode::Max) {
      const Fn sparse = [&, mode](const std::vector<Tensor>& in) {
        return embedding_bag(in[0], input, offsets, mode, Tensor(), /*sparse=*/true);
      };
      REQUIRE_GRADCHECK(sparse, random_leaf({5, 3}, 40));
    }
  }
  // Per-sample weights (mode sum): gradients for both the table and the weights.
  const Fn psw = [&](const std::vector<Tensor>& in) {
    return embedding_bag(in[0], input, offsets, EmbeddingBagMode::Sum, in[1]);
  };
  const Fn psw_sparse = [&](const std::vector<Tensor>& in) {
    return embedding_bag(in[0], input, offsets, EmbeddingBagMode::Sum, in[1], /*sparse=*/true);
  };
  REQUIRE_GRADCHECK(psw, random_leaf({5, 3}, 41), random_leaf({7}, 42));
  REQUIRE_GRADCHECK(psw, transposed_leaf(5, 3, 43), stepped_leaf({7}, 44));
  REQUIRE_GRADCHECK(psw_sparse, random_leaf({5, 3}, 45), random_leaf({7}, 46));
  // Only the per-sample weights require grad.
  const Tensor table = from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {5, 3});
  const Fn weights_only = [&](const std::vector<Tensor>& in) {
    return embedding_bag(table, input, offsets, EmbeddingBagMode::Sum, in[0]);
  };
  REQUIRE_GRADCHECK(weights_only, random_leaf({7}, 47));
  // A trailing empty bag, and no indices at all.
  const Tensor trailing = from_vector<int64_t>({0, 7}, {2});
  const Fn fn_trailing = [&](const std::vector<Tensor>& in) {
    return embedding_bag(in[0], input, trailing, EmbeddingBagMode::Mean);
  };
  REQUIRE_GRADCHECK(fn_trailing, random_leaf({5, 3}, 48));
  Tensor w = random_leaf({5, 3}, 49);
  Tensor none = embedding_bag(w, from_vector<int64_t>(std::vector<int64_t>{}, {0}), from_vector<int64_t>({0, 0}, {2}),
                              EmbeddingBagMode::Sum, Tensor(), true);
  autograd::backward(autograd::sum(none));
  REQUIRE(autograd::grad(w).is_sparse());
  CHECK(all_close(values_of(autograd::grad(w)), std::vector<double>(15, 0.0)));

  CHECK_THROWS_WITH(embedding_bag(w, input, offsets, EmbeddingBagMode::Mean, random_leaf({7}, 50)),
                    Contains("only supported for mode='sum'"));
  CHECK_THROWS_WITH(embedding_bag(w, input, from_vector<int64_t>({1, 3}, {2}), EmbeddingBagMode::Sum),
                    Contains("offsets[0] has to be 0"));
  CHECK_THROWS_WITH(embedding_bag(w, from_vector<int64_t>({5}, {1}), from_vector<int64_t>({0}, {1}),
                                  EmbeddingBagMode::Sum),
                    Contains("out of bounds"));
}

}  // namespace
}  // namespace braid::autograd
