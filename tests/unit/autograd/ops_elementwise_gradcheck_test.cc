// Gradchecks of the elementwise ops: binary ops with broadcasting ([3,1] with [1,4], [1], 0-dim) and
// non-contiguous operands, scalar forms, and every unary op on contiguous and strided inputs.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <utility>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/shape.h"
#include "autograd_test_util.h"
#include "tensor/ops/elementwise.h"

namespace braid::autograd {
namespace {

using testing::Fn;
using testing::positive_leaf;
using testing::random_leaf;
using testing::stepped_leaf;
using testing::transposed_leaf;

using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;

// The binary ops; `b` is kept away from zero for div.
std::vector<std::pair<std::string, Binary>> binary_ops() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return autograd::add(a, b); }},
      {"add alpha", [](const Tensor& a, const Tensor& b) { return autograd::add(a, b, 2.5); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return autograd::sub(a, b); }},
      {"sub alpha", [](const Tensor& a, const Tensor& b) { return autograd::sub(a, b, -1.5); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return autograd::mul(a, b); }},
      {"div", [](const Tensor& a, const Tensor& b) { return autograd::div(a, b); }},
  };
}

TEST_CASE("gradcheck: binary ops, same shapes", "[autograd][gradcheck][elementwise]") {
  for (const auto& [name, op] : binary_ops()) {
    INFO(name);
    const Fn fn = [op = op](const std::vector<Tensor>& in) { return op(in[0], in[1]); };
    REQUIRE_GRADCHECK(fn, random_leaf({2, 3}, 1), positive_leaf({2, 3}, 2));
  }
}

TEST_CASE("gradcheck: binary ops, broadcasting", "[autograd][gradcheck][elementwise]") {
  for (const auto& [name, op] : binary_ops()) {
    INFO(name);
    const Fn fn = [op = op](const std::vector<Tensor>& in) { return op(in[0], in[1]); };
    REQUIRE_GRADCHECK(fn, random_leaf({3, 1}, 3), positive_leaf({1, 4}, 4));
    REQUIRE_GRADCHECK(fn, random_leaf({3, 4}, 5), positive_leaf({1}, 6));
    REQUIRE_GRADCHECK(fn, random_leaf({1}, 7), positive_leaf({2, 3}, 8));
    REQUIRE_GRADCHECK(fn, random_leaf({2, 3}, 9), positive_leaf({}, 10));
    REQUIRE_GRADCHECK(fn, random_leaf({4}, 11), positive_leaf({2, 3, 1}, 12));
    REQUIRE_GRADCHECK(fn, random_leaf({}, 13), positive_leaf({}, 14));
  }
}

TEST_CASE("gradcheck: binary ops, non-contiguous operands", "[autograd][gradcheck][elementwise]") {
  for (const auto& [name, op] : binary_ops()) {
    INFO(name);
    const Fn fn = [op = op](const std::vector<Tensor>& in) { return op(in[0], in[1]); };
    // Strided leaves: the kernels read them as they are.
    Tensor b = stepped_leaf({3, 4}, 16);
    b.copy_(braid::add(braid::abs(b), 0.5));  // away from zero, for div (a raw op: nothing is recorded)
    REQUIRE_GRADCHECK(fn, transposed_leaf(3, 4, 15), b);
    // Views taken inside the function: transpose and a stepped slice, with broadcasting.
    const Fn viewed = [op = op](const std::vector<Tensor>& in) {
      return op(autograd::transpose(in[0], 0, 1), autograd::slice(in[1], 1, 0, 8, 2));
    };
    REQUIRE_GRADCHECK(viewed, random_leaf({4, 3}, 17), positive_leaf({1, 8}, 18));
    // The same tensor on both sides.
    const Fn same = [op = op](const std::vector<Tensor>& in) { return op(in[0], in[0]); };
    REQUIRE_GRADCHECK(same, positive_leaf({2, 2}, 19));
  }
}

TEST_CASE("gradcheck: only one operand requires grad", "[autograd][gradcheck][elementwise]") {
  const Tensor constant = from_vector<double>({0.5, -2, 3}, {3});
  for (const auto& [name, op] : binary_ops()) {
    INFO(name);
    const Fn left = [op = op, &constant](const std::vector<Tensor>& in) { return op(in[0], constant); };
    const Fn right = [op = op, &constant](const std::vector<Tensor>& in) { return op(constant, in[0]); };
    REQUIRE_GRADCHECK(left, random_leaf({2, 3}, 20));
    REQUIRE_GRADCHECK(right, positive_leaf({2, 3}, 21));
  }
}

TEST_CASE("gradcheck: scalar forms and neg", "[autograd][gradcheck][elementwise]") {
  const std::vector<std::pair<std::string, Fn>> ops = {
      {"add scalar", [](const std::vector<Tensor>& in) { return autograd::add(in[0], 2.5); }},
      {"mul scalar", [](const std::vector<Tensor>& in) { return autograd::mul(in[0], -3.0); }},
      {"div scalar", [](const std::vector<Tensor>& in) { return autograd::div(in[0], 4.0); }},
      {"neg", [](const std::vector<Tensor>& in) { return autograd::neg(in[0]); }},
  };
  for (const auto& [name, fn] : ops) {
    INFO(name);
    REQUIRE_GRADCHECK(fn, random_leaf({2, 3}, 22));
    REQUIRE_GRADCHECK(fn, transposed_leaf(2, 3, 23));
    REQUIRE_GRADCHECK(fn, random_leaf({}, 24));
  }
}

TEST_CASE("gradcheck: pow", "[autograd][gradcheck][elementwise]") {
  for (double e : {0.5, 2.0, -1.0, 3.0, 1.0, 0.0, -2.5}) {
    INFO("exponent " << e);
    const Fn fn = [e](const std::vector<Tensor>& in) { return autograd::pow(in[0], e); };
    REQUIRE_GRADCHECK(fn, positive_leaf({2, 3}, 25));
    const Fn viewed = [e](const std::vector<Tensor>& in) { return autograd::pow(autograd::transpose(in[0], 0, 1), e); };
    REQUIRE_GRADCHECK(viewed, positive_leaf({3, 2}, 26));
  }
  // Integer exponents are fine for negative bases too.
  for (double e : {2.0, 3.0, -1.0}) {
    INFO("exponent " << e);
    const Fn fn = [e](const std::vector<Tensor>& in) { return autograd::pow(in[0], e); };
    REQUIRE_GRADCHECK(fn, transposed_leaf(3, 2, 28));
  }
}

TEST_CASE("gradcheck: unary math", "[autograd][gradcheck][elementwise]") {
  // `positive` marks functions whose input must stay away from zero or negatives.
  struct Case {
    std::string name;
    Fn fn;
    bool positive;
  };
  const std::vector<Case> cases = {
      {"exp", [](const std::vector<Tensor>& in) { return autograd::exp(in[0]); }, false},
      {"log", [](const std::vector<Tensor>& in) { return autograd::log(in[0]); }, true},
      {"sqrt", [](const std::vector<Tensor>& in) { return autograd::sqrt(in[0]); }, true},
      {"abs", [](const std::vector<Tensor>& in) { return autograd::abs(in[0]); }, false},
      {"relu", [](const std::vector<Tensor>& in) { return autograd::relu(in[0]); }, false},
      {"gelu", [](const std::vector<Tensor>& in) { return autograd::gelu(in[0]); }, false},
      {"sigmoid", [](const std::vector<Tensor>& in) { return autograd::sigmoid(in[0]); }, false},
      {"tanh", [](const std::vector<Tensor>& in) { return autograd::tanh(in[0]); }, false},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    if (c.positive) {
      REQUIRE_GRADCHECK(c.fn, positive_leaf({2, 3}, 29));
      REQUIRE_GRADCHECK(c.fn, positive_leaf({}, 30));
      // Non-contiguous: the transpose of a positive leaf, taken inside the function.
      const Fn viewed = [fn = c.fn](const std::vector<Tensor>& in) { return fn({autograd::transpose(in[0], 0, 1)}); };
      REQUIRE_GRADCHECK(viewed, positive_leaf({3, 2}, 31));
    } else {
      REQUIRE_GRADCHECK(c.fn, random_leaf({2, 3}, 32));
      REQUIRE_GRADCHECK(c.fn, random_leaf({}, 33));
      REQUIRE_GRADCHECK(c.fn, transposed_leaf(3, 4, 34));
      REQUIRE_GRADCHECK(c.fn, stepped_leaf({2, 3}, 35));
    }
  }
}

TEST_CASE("gradcheck: a chain of elementwise ops", "[autograd][gradcheck][elementwise]") {
  const Fn fn = [](const std::vector<Tensor>& in) {
    Tensor h = autograd::tanh(autograd::add(autograd::mul(in[0], in[1]), in[2]));
    return autograd::div(autograd::gelu(h), autograd::add(autograd::exp(in[1]), 1.0));
  };
  REQUIRE_GRADCHECK(fn, random_leaf({3, 1}, 36), random_leaf({1, 4}, 37), transposed_leaf(3, 4, 38));
}

}  // namespace
}  // namespace braid::autograd
