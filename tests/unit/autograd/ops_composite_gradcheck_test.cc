// Gradchecks of ops combined: rules fed non-contiguous incoming gradients (the narrow views CatBackward
// and the selects StackBackward hand on), a small MLP with every parameter checked, and attention.
#include <catch2/catch.hpp>

#include <cmath>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/shape.h"
#include "autograd_test_util.h"

namespace braid::autograd {
namespace {

using testing::Fn;
using testing::random_leaf;
using testing::transposed_leaf;

TEST_CASE("gradcheck: rules receive non-contiguous output gradients", "[autograd][gradcheck][composite]") {
  // Concatenated along dim 1, every op's output gradient is a strided column block of the root's.
  const Tensor bag_input = from_vector<int64_t>({0, 1, 1, 0}, {4});
  const Tensor bag_offsets = from_vector<int64_t>({0, 1, 3}, {3});
  const Tensor index = from_vector<int64_t>({1, 1, 0}, {3});
  const Fn fn = [&](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];  // [3, 2]
    const Tensor& w = in[1];  // [2, 2]
    const Tensor& b = in[2];  // [2]
    return autograd::cat({autograd::mm(x, w), autograd::linear(x, w, b), embedding_bag(w, bag_input, bag_offsets,
                                                                                      EmbeddingBagMode::Mean),
                          autograd::softmax(x, 1), autograd::log_softmax(x, 0), autograd::index_select(x, 0, index),
                          autograd::layer_norm(x, {2}, b, b), autograd::gelu(x), autograd::div(x, autograd::exp(x)),
                          autograd::reshape(autograd::transpose(autograd::mul(x, x), 0, 1), {3, 2})},
                         1);
  };
  REQUIRE_GRADCHECK(fn, random_leaf({3, 2}, 1), random_leaf({2, 2}, 2), random_leaf({2}, 3));

  // Stacked along the last dim: each gradient is a select with stride > 1.
  const Fn stacked = [](const std::vector<Tensor>& in) {
    return autograd::stack({autograd::sum(in[0], {1}), autograd::mean(in[0], {1}), autograd::matmul(in[0], in[1]),
                            autograd::nll_loss(autograd::log_softmax(in[0], 1), from_vector<int64_t>({0, 2}, {2}),
                                               Reduction::None)},
                           -1);
  };
  REQUIRE_GRADCHECK(stacked, transposed_leaf(2, 3, 4), random_leaf({3}, 5));
}

TEST_CASE("gradcheck: a small MLP, every parameter", "[autograd][gradcheck][composite]") {
  const Tensor target = from_vector<int64_t>({1, 0, 2, 1}, {4});
  const Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor h = autograd::gelu(autograd::linear(in[0], in[1], in[2]));
    h = autograd::layer_norm(h, {5}, in[3], in[4]);
    Tensor logits = autograd::linear(h, in[5], in[6]);
    return autograd::cross_entropy(logits, target);
  };
  REQUIRE_GRADCHECK(fn, random_leaf({4, 3}, 10), random_leaf({5, 3}, 11), random_leaf({5}, 12), random_leaf({5}, 13),
                    random_leaf({5}, 14), random_leaf({3, 5}, 15), random_leaf({3}, 16));
}

TEST_CASE("gradcheck: scaled dot-product attention", "[autograd][gradcheck][composite]") {
  const Fn fn = [](const std::vector<Tensor>& in) {
    // q, k, v: [batch 2, seq 3, dim 2]
    Tensor scores = autograd::div(autograd::matmul(in[0], autograd::transpose(in[1], 1, 2)), std::sqrt(2.0));
    return autograd::matmul(autograd::softmax(scores, -1), in[2]);
  };
  REQUIRE_GRADCHECK(fn, random_leaf({2, 3, 2}, 20), random_leaf({2, 3, 2}, 21), random_leaf({2, 3, 2}, 22));
  // The same tensor as q, k and v.
  const Fn self = [&fn](const std::vector<Tensor>& in) { return fn({in[0], in[0], in[0]}); };
  REQUIRE_GRADCHECK(self, random_leaf({2, 3, 2}, 23));
}

}  // namespace
}  // namespace braid::autograd
