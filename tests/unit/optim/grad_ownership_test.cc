// .grad owns its buffer. AccumulateGrad takes over a gradient nothing else references (no copy, as
// PyTorch does; the optimizer benchmark relies on it) and copies every gradient that is shared, so that
// the optimizers' in-place updates and later accumulations never write into someone else's tensor.
#include "autograd/engine.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/reduce.h"
#include "optim_test_util.h"
#include "tensor/ops/elementwise.h"

using namespace braid;
using namespace braid::nn::optim::testing;

TEST_CASE("grad ownership: a fresh gradient becomes .grad; accumulation stays correct", "[optim][grad]") {
  Tensor w = param({1, 2, 3, 4}, {2, 2});
  Tensor x = from_vector<double>({1, 0, 0, 1}, {2, 2});
  autograd::backward(autograd::sum(autograd::mm(x, w)));
  const Tensor g1 = autograd::grad(w);
  require_close(g1, {1, 1, 1, 1});
  CHECK(g1.storage().use_count() == 1);  // nobody else holds the buffer
  autograd::backward(autograd::sum(autograd::mm(x, w)));
  require_close(autograd::grad(w), {2, 2, 2, 2});
  CHECK(autograd::grad(w).is_same(g1));  // accumulated in place
}

TEST_CASE("grad ownership: one gradient reaching two leaves is not shared between them", "[optim][grad]") {
  Tensor a = param({1, 2});
  Tensor b = param({3, 4});
  // add's rule hands the same gradient tensor to both inputs.
  autograd::backward(autograd::sum(autograd::add(a, b)));
  const Tensor ga = autograd::grad(a);
  const Tensor gb = autograd::grad(b);
  REQUIRE_FALSE(ga.shares_storage_with(gb));
  ga.add_(from_vector<double>({10, 10}));
  require_close(gb, {1, 1});
}

TEST_CASE("grad ownership: the caller's gradient and a hook's capture are copied", "[optim][grad]") {
  SECTION("grad_tensors of a leaf") {
    Tensor w = param({1, 2});
    const Tensor g = from_vector<double>({5, 6});
    autograd::backward({w}, {g});
    REQUIRE_FALSE(autograd::grad(w).shares_storage_with(g));
    autograd::grad(w).add_(g);
    require_close(g, {5, 6});
  }
  SECTION("a tensor hook keeps the gradient") {
    Tensor w = param({1, 2});
    Tensor seen;
    autograd::register_hook(w, [&](const Tensor& g) {
      seen = g;
      return Tensor();
    });
    autograd::backward(autograd::sum(autograd::mul(w, 3.0)));
    REQUIRE(seen.defined());
    REQUIRE_FALSE(autograd::grad(w).shares_storage_with(seen));
    autograd::grad(w).zero_();
    require_close(seen, {3, 3});
  }
}
