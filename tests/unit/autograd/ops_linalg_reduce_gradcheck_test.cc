// Gradchecks of the matrix products (mm, bmm, every matmul case, linear) and the reductions (sum, mean
// over dims with and without keepdim, norm), on contiguous and non-contiguous inputs.
#include <catch2/catch.hpp>

#include <cmath>

#include "autograd/ops/linalg.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/shape.h"
#include "autograd_test_util.h"

namespace braid::autograd {
namespace {

using testing::Fn;
using Catch::Contains;
using testing::leaf;
using testing::random_leaf;
using testing::stepped_leaf;
using testing::transposed_leaf;
using testing::values_of;

TEST_CASE("gradcheck: mm", "[autograd][gradcheck][linalg]") {
  const Fn fn = [](const std::vector<Tensor>& in) { return autograd::mm(in[0], in[1]); };
  REQUIRE_GRADCHECK(fn, random_leaf({2, 3}, 1), random_leaf({3, 4}, 2));
  REQUIRE_GRADCHECK(fn, transposed_leaf(2, 3, 3), transposed_leaf(3, 4, 4));
  REQUIRE_GRADCHECK(fn, stepped_leaf({2, 3}, 5), random_leaf({3, 1}, 6));
  // Only one side requires grad.
  const Tensor b = from_vector<double>({1, 2, 3, 4, 5, 6}, {3, 2});
  const Fn left = [&b](const std::vector<Tensor>& in) { return autograd::mm(in[0], b); };
  REQUIRE_GRADCHECK(left, random_leaf({2, 3}, 7));
  const Fn right = [&b](const std::vector<Tensor>& in) { return autograd::mm(b.t(), in[0]); };
  REQUIRE_GRADCHECK(right, random_leaf({3, 2}, 8));
}

TEST_CASE("gradcheck: bmm", "[autograd][gradcheck][linalg]") {
  const Fn fn = [](const std::vector<Tensor>& in) { return autograd::bmm(in[0], in[1]); };
  REQUIRE_GRADCHECK(fn, random_leaf({2, 3, 4}, 9), random_leaf({2, 4, 2}, 10));
  // Transposed inner matrices, taken inside the function.
  const Fn viewed = [](const std::vector<Tensor>& in) {
    return autograd::bmm(autograd::transpose(in[0], 1, 2), autograd::permute(in[1], {1, 0, 2}));
  };
  REQUIRE_GRADCHECK(viewed, random_leaf({2, 4, 3}, 11), random_leaf({4, 2, 2}, 12));
}

TEST_CASE("gradcheck: matmul", "[autograd][gradcheck][linalg]") {
  const Fn fn = [](const std::vector<Tensor>& in) { return autograd::matmul(in[0], in[1]); };
  struct Case {
    Shape a, b, out;
  };
  const std::vector<Case> cases = {
      {{3}, {3}, {}},                      // dot
      {{2, 3}, {3}, {2}},                  // matrix-vector
      {{3}, {3, 2}, {2}},                  // vector-matrix
      {{2, 3}, {3, 4}, {2, 4}},            // matrix-matrix
      {{2, 2, 3}, {3, 4}, {2, 2, 4}},      // batched by a matrix
      {{2, 2, 3}, {2, 3, 2}, {2, 2, 2}},   // batched
      {{2, 1, 2, 3}, {3, 3, 2}, {2, 3, 2, 2}},  // broadcast batch dims
      {{3}, {2, 3, 2}, {2, 2}},            // vector by a batch
      {{2, 2, 3}, {3}, {2, 2}},            // batch by a vector
      {{1, 2, 3}, {4, 3, 1}, {4, 2, 1}},   // size-1 batch broadcast
  };
  uint64_t seed = 20;
  for (const auto& c : cases) {
    INFO(shape_str(c.a) << " x " << shape_str(c.b));
    Tensor a = random_leaf(c.a, seed++);
    Tensor b = random_leaf(c.b, seed++);
    CHECK(autograd::matmul(a, b).shape() == c.out);
    REQUIRE_GRADCHECK(fn, a, b);
  }
  // Non-contiguous operands.
  REQUIRE_GRADCHECK(fn, transposed_leaf(2, 3, 40), stepped_leaf({3}, 41));
  const Fn viewed = [](const std::vector<Tensor>& in) {
    return autograd::matmul(autograd::transpose(in[0], 1, 2), in[1]);
  };
  REQUIRE_GRADCHECK(viewed, random_leaf({2, 3, 2}, 42), transposed_leaf(3, 2, 43));
  CHECK_THROWS_WITH(autograd::matmul(random_leaf({2, 2, 3}, 44), random_leaf({3, 3, 2}, 45)),
                    Contains("do not broadcast"));
}

TEST_CASE("gradcheck: linear", "[autograd][gradcheck][linalg]") {
  const Fn with_bias = [](const std::vector<Tensor>& in) { return autograd::linear(in[0], in[1], in[2]); };
  const Fn no_bias = [](const std::vector<Tensor>& in) { return autograd::linear(in[0], in[1]); };
  REQUIRE_GRADCHECK(with_bias, random_leaf({4, 3}, 50), random_leaf({2, 3}, 51), random_leaf({2}, 52));
  REQUIRE_GRADCHECK(no_bias, random_leaf({4, 3}, 53), random_leaf({2, 3}, 54));
  // 3-D and 1-D inputs.
  REQUIRE_GRADCHECK(with_bias, random_leaf({2, 2, 3}, 55), random_leaf({4, 3}, 56), random_leaf({4}, 57));
  REQUIRE_GRADCHECK(with_bias, random_leaf({3}, 58), random_leaf({2, 3}, 59), random_leaf({2}, 60));
  // Non-contiguous input and weight.
  REQUIRE_GRADCHECK(with_bias, transposed_leaf(4, 3, 61), transposed_leaf(2, 3, 62), stepped_leaf({2}, 63));
  const Fn viewed = [](const std::vector<Tensor>& in) {
    return autograd::linear(autograd::transpose(in[0], 0, 1), in[1], in[2]);
  };
  REQUIRE_GRADCHECK(viewed, random_leaf({3, 2, 2}, 64), random_leaf({2, 2}, 65), random_leaf({2}, 66));
  // Only the bias requires grad.
  const Tensor x = from_vector<double>({1, 2, 3, 4}, {2, 2});
  const Tensor w = from_vector<double>({1, 0, 0, 1}, {2, 2});
  const Fn bias_only = [&](const std::vector<Tensor>& in) { return autograd::linear(x, w, in[0]); };
  REQUIRE_GRADCHECK(bias_only, random_leaf({2}, 67));
}

TEST_CASE("gradcheck: sum and mean", "[autograd][gradcheck][reduce]") {
  struct Case {
    Shape dims;
    bool keepdim;
  };
  const std::vector<Case> cases = {{{}, false}, {{}, true},      {{1}, false},  {{1}, true},
                                   {{0, 2}, false}, {{0, 2}, true}, {{-1}, false}, {{2, 0}, false}};
  for (const auto& c : cases) {
    INFO("dims " << shape_str(c.dims) << " keepdim " << c.keepdim);
    const Fn sum = [c](const std::vector<Tensor>& in) { return autograd::sum(in[0], c.dims, c.keepdim); };
    const Fn mean = [c](const std::vector<Tensor>& in) { return autograd::mean(in[0], c.dims, c.keepdim); };
    REQUIRE_GRADCHECK(sum, random_leaf({2, 3, 2}, 70));
    REQUIRE_GRADCHECK(mean, random_leaf({2, 3, 2}, 71));
    REQUIRE_GRADCHECK(sum, stepped_leaf({2, 3, 2}, 72));
    REQUIRE_GRADCHECK(mean, stepped_leaf({2, 3, 2}, 73));
  }
  const Fn sum_all = [](const std::vector<Tensor>& in) { return autograd::sum(in[0]); };
  REQUIRE_GRADCHECK(sum_all, random_leaf({}, 74));
  REQUIRE_GRADCHECK(sum_all, transposed_leaf(3, 2, 75));
}

TEST_CASE("gradcheck: norm", "[autograd][gradcheck][reduce]") {
  const Fn fn = [](const std::vector<Tensor>& in) { return autograd::norm(in[0]); };
  REQUIRE_GRADCHECK(fn, random_leaf({2, 3}, 80));
  REQUIRE_GRADCHECK(fn, transposed_leaf(3, 2, 81));
  REQUIRE_GRADCHECK(fn, random_leaf({}, 82));
  // At zero the gradient is the zero subgradient, not NaN.
  Tensor z = leaf({0, 0, 0}, {3});
  autograd::backward(autograd::norm(z));
  CHECK(values_of(autograd::grad(z)) == std::vector<double>{0, 0, 0});
}

}  // namespace
}  // namespace braid::autograd
