// gradcheck itself: it accepts a correct rule, rejects a wrong or missing one (so the op tests can fail),
// handles non-contiguous inputs and sparse analytical gradients, and validates its arguments.
#include <catch2/catch.hpp>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/op_helpers.h"
#include "autograd_test_util.h"
#include "tensor/ops/elementwise.h"

namespace braid::autograd {
namespace {

using testing::Fn;
using Catch::Contains;
using testing::random_leaf;
using testing::transposed_leaf;

// y = x * x with a chosen backward rule.
Tensor square_with_rule(const Tensor& x, FunctionNode::Backward rule) {
  return detail::record("SquareBackward", {x}, braid::mul(x, x), {SavedTensor(x, "SquareBackward")}, std::move(rule));
}

TEST_CASE("gradcheck: accepts a correct rule", "[autograd][gradcheck]") {
  const Fn fn = [](const std::vector<Tensor>& in) {
    return square_with_rule(in[0], [](const TensorList& g, SavedTensors& s) {
      return TensorList{braid::mul(braid::mul(g[0], s[0].unpack()), 2.0)};
    });
  };
  REQUIRE_GRADCHECK(fn, random_leaf({2, 3}, 1));
  REQUIRE_GRADCHECK(fn, transposed_leaf(3, 2, 2));
}

TEST_CASE("gradcheck: rejects a wrong rule", "[autograd][gradcheck]") {
  const Fn wrong = [](const std::vector<Tensor>& in) {
    return square_with_rule(in[0], [](const TensorList& g, SavedTensors& s) {
      return TensorList{braid::mul(g[0], s[0].unpack())};  // forgot the factor 2
    });
  };
  const auto r = gradcheck(wrong, {random_leaf({2, 3}, 3)});
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.message, Contains("Jacobian mismatch"));

  // A rule that routes gradients to the wrong elements (transposed) is caught too.
  const Fn scrambled = [](const std::vector<Tensor>& in) {
    return square_with_rule(in[0], [](const TensorList& g, SavedTensors& s) {
      return TensorList{braid::mul(braid::mul(g[0], s[0].unpack()), 2.0).t().contiguous()};
    });
  };
  CHECK_FALSE(gradcheck(scrambled, {random_leaf({3, 3}, 9)}).ok);

  // A missing gradient counts as zero.
  const Fn missing = [](const std::vector<Tensor>& in) {
    return square_with_rule(in[0],
                            [](const TensorList&, SavedTensors&) { return TensorList{Tensor()}; });
  };
  CHECK_FALSE(gradcheck(missing, {random_leaf({3}, 4)}).ok);
}

TEST_CASE("gradcheck: checks every input", "[autograd][gradcheck]") {
  // Correct for the first input, wrong for the second.
  const Fn fn = [](const std::vector<Tensor>& in) {
    return detail::record("MulBackward", {in[0], in[1]}, braid::mul(in[0], in[1]),
                          {SavedTensor(in[0], "x"), SavedTensor(in[1], "y")},
                          [](const TensorList& g, SavedTensors& s) {
                            return TensorList{braid::mul(g[0], s[1].unpack()), braid::mul(g[0], s[1].unpack())};
                          });
  };
  const auto r = gradcheck(fn, {random_leaf({4}, 5), random_leaf({4}, 6)});
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.message, Contains("input 1"));
}

TEST_CASE("gradcheck: validates its inputs", "[autograd][gradcheck]") {
  const Fn fn = [](const std::vector<Tensor>& in) { return autograd::exp(in[0]); };
  Tensor f32 = from_vector<float>({1, 2}, {2});
  set_requires_grad(f32);
  CHECK_THROWS_WITH(gradcheck(fn, {f32}), Contains("must be a float64 CPU tensor"));
  CHECK_THROWS_WITH(gradcheck(fn, {from_vector<double>({1, 2}, {2})}), Contains("must be a leaf that requires grad"));
  Tensor x = random_leaf({2}, 7);
  CHECK_THROWS_WITH(gradcheck(fn, {autograd::mul(x, 2.0)}), Contains("must be a leaf that requires grad"));
  CHECK_THROWS_WITH(gradcheck([](const std::vector<Tensor>&) { return from_vector<double>({1}, {1}); }, {x}),
                    Contains("the output does not require grad"));
}

TEST_CASE("gradcheck: compares sparse gradients through their dense values", "[autograd][gradcheck][sparse]") {
  const Tensor input = from_vector<int64_t>({2, 0, 2, 1}, {4});
  const Tensor offsets = from_vector<int64_t>({0, 1, 1}, {3});
  const Fn fn = [&](const std::vector<Tensor>& in) {
    return embedding_bag(in[0], input, offsets, EmbeddingBagMode::Mean, Tensor(), /*sparse=*/true);
  };
  REQUIRE_GRADCHECK(fn, random_leaf({3, 2}, 8));
}

}  // namespace
}  // namespace braid::autograd
