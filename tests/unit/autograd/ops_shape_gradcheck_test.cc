// Gradchecks of the differentiable views, conversions, joins, splits and indexing, on contiguous and
// non-contiguous inputs.
#include <catch2/catch.hpp>

#include <string>
#include <utility>

#include "autograd/ops/elementwise.h"
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

TEST_CASE("gradcheck: views", "[autograd][gradcheck][shape]") {
  const std::vector<std::pair<std::string, Fn>> ops = {
      {"view", [](const std::vector<Tensor>& in) { return autograd::view(autograd::contiguous(in[0]), {3, 2, 2}); }},
      {"view -1", [](const std::vector<Tensor>& in) { return autograd::view(autograd::contiguous(in[0]), {-1}); }},
      {"reshape", [](const std::vector<Tensor>& in) { return autograd::reshape(in[0], {2, 6}); }},
      {"transpose", [](const std::vector<Tensor>& in) { return autograd::transpose(in[0], 0, 2); }},
      {"permute", [](const std::vector<Tensor>& in) { return autograd::permute(in[0], {2, 0, 1}); }},
      {"permute negative", [](const std::vector<Tensor>& in) { return autograd::permute(in[0], {-1, -3, -2}); }},
      {"expand",
       [](const std::vector<Tensor>& in) { return autograd::expand(autograd::narrow(in[0], 2, 0, 1), {2, 2, 3, 3}); }},
      {"unsqueeze", [](const std::vector<Tensor>& in) { return autograd::unsqueeze(in[0], 1); }},
      {"unsqueeze end", [](const std::vector<Tensor>& in) { return autograd::unsqueeze(in[0], -1); }},
      {"squeeze", [](const std::vector<Tensor>& in) { return autograd::squeeze(autograd::narrow(in[0], 1, 1, 1), 1); }},
      {"flatten", [](const std::vector<Tensor>& in) { return autograd::flatten(in[0]); }},
      {"flatten range", [](const std::vector<Tensor>& in) { return autograd::flatten(in[0], 1, 2); }},
      {"narrow", [](const std::vector<Tensor>& in) { return autograd::narrow(in[0], 1, 1, 2); }},
      {"slice step", [](const std::vector<Tensor>& in) { return autograd::slice(in[0], 1, 0, 3, 2); }},
      {"slice clamped", [](const std::vector<Tensor>& in) { return autograd::slice(in[0], 2, 1, 100, 1); }},
      {"slice negative", [](const std::vector<Tensor>& in) { return autograd::slice(in[0], 0, -1, 2, 1); }},
      {"select", [](const std::vector<Tensor>& in) { return autograd::select(in[0], 1, 2); }},
      {"select negative", [](const std::vector<Tensor>& in) { return autograd::select(in[0], -1, -1); }},
      {"contiguous", [](const std::vector<Tensor>& in) { return autograd::contiguous(in[0]); }},
      {"to same dtype", [](const std::vector<Tensor>& in) { return autograd::to(in[0], DType::Float64); }},
  };
  for (const auto& [name, fn] : ops) {
    INFO(name);
    REQUIRE_GRADCHECK(fn, random_leaf({2, 3, 2}, 1));
    // A non-contiguous leaf: [2, 3, 2] seen through a permutation of a [2, 2, 3] tensor.
    Generator gen(2);
    Tensor permuted = randn({2, 2, 3}, DType::Float64, &gen).permute({0, 2, 1});
    set_requires_grad(permuted);
    REQUIRE_GRADCHECK(fn, permuted);
    REQUIRE_GRADCHECK(fn, stepped_leaf({2, 3, 2}, 3));
  }
}

TEST_CASE("gradcheck: views of views and the same leaf through two views", "[autograd][gradcheck][shape]") {
  const Fn fn = [](const std::vector<Tensor>& in) {
    Tensor a = autograd::select(autograd::slice(autograd::transpose(in[0], 0, 1), 0, 0, 4, 2), 1, 1);
    Tensor b = autograd::narrow(autograd::flatten(in[0]), 0, 2, 2);
    return autograd::mul(a, b);
  };
  REQUIRE_GRADCHECK(fn, random_leaf({3, 4}, 4));
}

TEST_CASE("gradcheck: to() converts the gradient back", "[autograd][gradcheck][shape]") {
  // float64 -> float32 -> float64 loses precision, so a larger step and tolerance.
  const Fn fn = [](const std::vector<Tensor>& in) {
    return autograd::to(autograd::mul(autograd::to(in[0], DType::Float32), 3.0), DType::Float64);
  };
  GradcheckOptions options;
  options.eps = 1e-3;
  options.atol = 1e-3;
  const auto r = gradcheck(fn, {random_leaf({2, 3}, 5)}, options);
  INFO(r.message);
  CHECK(r.ok);
  // A float32 leaf used in float64 math gets a float32 gradient.
  Tensor x = from_vector<float>({1, 2}, {2});
  set_requires_grad(x);
  autograd::backward(autograd::sum(autograd::mul(autograd::to(x, DType::Float64), 2.0)));
  CHECK(autograd::grad(x).dtype() == DType::Float32);
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{2, 2});
}

TEST_CASE("gradcheck: index_select", "[autograd][gradcheck][shape]") {
  const Tensor repeated = from_vector<int64_t>({2, 0, 2, 2, 1}, {5});
  const Tensor small = from_vector<int32_t>({1, 1}, {2});
  for (int64_t dim : {0, 1, -1}) {
    INFO("dim " << dim);
    const Fn fn = [&, dim](const std::vector<Tensor>& in) { return autograd::index_select(in[0], dim, repeated); };
    const Fn fn32 = [&, dim](const std::vector<Tensor>& in) { return autograd::index_select(in[0], dim, small); };
    REQUIRE_GRADCHECK(fn, random_leaf({3, 3}, 6));
    REQUIRE_GRADCHECK(fn, transposed_leaf(3, 3, 7));
    REQUIRE_GRADCHECK(fn32, stepped_leaf({3, 3}, 8));
  }
  const Fn one_d = [&](const std::vector<Tensor>& in) { return autograd::index_select(in[0], 0, repeated); };
  REQUIRE_GRADCHECK(one_d, random_leaf({3}, 9));
  const Fn middle = [&](const std::vector<Tensor>& in) { return autograd::index_select(in[0], 1, repeated); };
  REQUIRE_GRADCHECK(middle, random_leaf({2, 3, 2}, 90));
  // Rows picked several times get the sum of their gradients.
  Tensor x = leaf({1, 2, 3}, {3});
  autograd::backward(autograd::sum(autograd::index_select(x, 0, repeated)));
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{1, 1, 3});
}

TEST_CASE("gradcheck: cat and stack", "[autograd][gradcheck][shape]") {
  const Fn cat0 = [](const std::vector<Tensor>& in) { return autograd::cat(in, 0); };
  const Fn cat1 = [](const std::vector<Tensor>& in) { return autograd::cat(in, 1); };
  const Fn cat_neg = [](const std::vector<Tensor>& in) { return autograd::cat(in, -1); };
  REQUIRE_GRADCHECK(cat0, random_leaf({2, 3}, 10), random_leaf({1, 3}, 11), transposed_leaf(3, 3, 12));
  REQUIRE_GRADCHECK(cat1, random_leaf({2, 1}, 13), stepped_leaf({2, 2}, 14), random_leaf({2, 3}, 15));
  REQUIRE_GRADCHECK(cat_neg, random_leaf({2, 1}, 16), random_leaf({2, 2}, 17));
  // Legacy: 1-D empty tensors are skipped whatever the other shapes; their gradient is empty too.
  REQUIRE_GRADCHECK(cat1, random_leaf({2, 2}, 18), random_leaf({0}, 19), random_leaf({2, 1}, 20));
  // A tensor that does not require grad among ones that do.
  const Tensor constant = from_vector<double>({1, 2}, {1, 2});
  const Fn mixed = [&](const std::vector<Tensor>& in) { return autograd::cat({in[0], constant, in[1]}, 0); };
  REQUIRE_GRADCHECK(mixed, random_leaf({2, 2}, 21), random_leaf({1, 2}, 22));

  const Fn stack0 = [](const std::vector<Tensor>& in) { return autograd::stack(in, 0); };
  const Fn stack1 = [](const std::vector<Tensor>& in) { return autograd::stack(in, 1); };
  const Fn stack_end = [](const std::vector<Tensor>& in) { return autograd::stack(in, -1); };
  for (const Fn& fn : {stack0, stack1, stack_end}) {
    REQUIRE_GRADCHECK(fn, random_leaf({2, 3}, 23), transposed_leaf(2, 3, 24), stepped_leaf({2, 3}, 25));
  }
}

TEST_CASE("gradcheck: 0-dim pieces and single pieces", "[autograd][gradcheck][shape]") {
  const Fn scalars = [](const std::vector<Tensor>& in) {
    return autograd::stack({autograd::select(in[0], 0, 1), autograd::sum(in[0]), autograd::select(in[0], 0, -1)}, 0);
  };
  REQUIRE_GRADCHECK(scalars, random_leaf({3}, 91));
  const Fn one_piece = [](const std::vector<Tensor>& in) {
    return autograd::cat({autograd::split(in[0], 10, 0)[0]}, 0);
  };
  REQUIRE_GRADCHECK(one_piece, random_leaf({3, 2}, 92));
  const Fn flat_scalar = [](const std::vector<Tensor>& in) { return autograd::flatten(in[0]); };
  REQUIRE_GRADCHECK(flat_scalar, random_leaf({}, 93));
}

TEST_CASE("gradcheck: split and chunk", "[autograd][gradcheck][shape]") {
  // Every piece used, weighted differently so that a mix-up shows.
  const auto weighted = [](const std::vector<Tensor>& pieces) {
    Tensor total;
    for (size_t i = 0; i < pieces.size(); ++i) {
      Tensor t = autograd::sum(autograd::mul(pieces[i], static_cast<double>(i + 1)));
      total = total.defined() ? autograd::add(total, t) : t;
    }
    return total;
  };
  const Fn split_uneven = [&](const std::vector<Tensor>& in) { return weighted(autograd::split(in[0], 2, 0)); };
  const Fn split_dim1 = [&](const std::vector<Tensor>& in) { return weighted(autograd::split(in[0], 1, 1)); };
  const Fn chunk3 = [&](const std::vector<Tensor>& in) { return weighted(autograd::chunk(in[0], 3, 0)); };
  const Fn chunk_last = [&](const std::vector<Tensor>& in) { return weighted(autograd::chunk(in[0], 2, -1)); };
  for (const Fn& fn : {split_uneven, split_dim1, chunk3, chunk_last}) {
    REQUIRE_GRADCHECK(fn, random_leaf({5, 3}, 26));
    REQUIRE_GRADCHECK(fn, transposed_leaf(5, 3, 27));
  }
  // A piece returned as it is (a non-scalar output of a multi-output node).
  const Fn middle = [](const std::vector<Tensor>& in) { return autograd::split(in[0], 2, 0)[1]; };
  REQUIRE_GRADCHECK(middle, random_leaf({5, 2}, 28));
  // Only some pieces used: the others contribute zeros.
  const Fn some = [](const std::vector<Tensor>& in) {
    auto pieces = autograd::chunk(in[0], 3, 1);
    return autograd::mul(pieces[0], pieces[2]);
  };
  REQUIRE_GRADCHECK(some, random_leaf({2, 6}, 29));
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {6});
  auto pieces = autograd::chunk(x, 3, 0);
  autograd::backward(autograd::sum(pieces[1]));
  CHECK(values_of(autograd::grad(x)) == std::vector<double>{0, 0, 1, 1, 0, 0});
}

}  // namespace
}  // namespace braid::autograd
