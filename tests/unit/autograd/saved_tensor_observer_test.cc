// Saved-tensor observers and early release: an observer sees every tensor saved on its thread while it is
// installed, its tokens live exactly as long as the saved tensors, LinearBackward drops its weight before
// computing the weight's gradient (only when the pass frees the graph), and a checkpoint counts as a use.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <vector>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "autograd/node.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/reduce.h"
#include "autograd/saved_tensor_observer.h"
#include "autograd/variable.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/unit/autograd/autograd_test_util.h"

namespace braid::autograd {
namespace {

using testing::random_leaf;

// Counts the live saved aliases of one storage; on_drop runs each time one goes.
class AliasCounter final : public SavedTensorObserver, public std::enable_shared_from_this<AliasCounter> {
 public:
  explicit AliasCounter(const Tensor& watched) : storage_(watched.storage().get()) {}
  std::shared_ptr<void> on_saved(const Tensor& t) override {
    if (t.storage().get() != storage_) return nullptr;
    return token();
  }
  std::shared_ptr<void> on_checkpoint() override { return checkpoints_count ? token() : nullptr; }
  int live = 0;
  int saved = 0;
  bool checkpoints_count = false;
  std::function<void()> on_drop;

 private:
  std::shared_ptr<void> token() {
    ++live;
    ++saved;
    auto self = shared_from_this();
    return std::shared_ptr<void>(static_cast<void*>(this), [self](void*) {
      --self->live;
      if (self->on_drop) self->on_drop();
    });
  }
  const Storage* storage_;
};

struct Installed {
  explicit Installed(const std::shared_ptr<AliasCounter>& c) : counter(c) { add_saved_tensor_observer(c); }
  ~Installed() { remove_saved_tensor_observer(counter.get()); }
  std::shared_ptr<AliasCounter> counter;
};

// y = x W^T recorded with a counter of W's saved aliases installed.
struct ObservedLinear {
  explicit ObservedLinear(uint64_t seed)
      : x(random_leaf({4, 3}, seed)), w(random_leaf({5, 3}, seed + 1)), counter(std::make_shared<AliasCounter>(w)) {
    Installed on(counter);
    y = linear(x, w, Tensor());
  }
  Tensor x, w;
  std::shared_ptr<AliasCounter> counter;
  Tensor y;
};

}  // namespace

TEST_CASE("saved tensor observer: tokens live as long as the saved tensors", "[autograd][saved]") {
  ObservedLinear l(1);
  auto& [x, w, counter, y] = l;
  CHECK(counter->saved == 1);  // the weight (x is saved too, but it is another storage)
  CHECK(counter->live == 1);
  // Outside the installation nothing is observed.
  const Tensor y2 = linear(x, w, Tensor());
  CHECK(counter->saved == 1);

  // During backward LinearBackward drops the weight inside its rule (once x's gradient is computed), not
  // when the engine releases the node after it ran.
  const std::shared_ptr<Node> node = grad_fn(y);
  std::vector<bool> released_at_drop;
  counter->on_drop = [&] { released_at_drop.push_back(node->released()); };
  backward(sum(y));
  CHECK(released_at_drop == std::vector<bool>{false});
  CHECK(counter->live == 0);
  // A rule that does not release early (mul saves both operands) lets go when the node is released.
  released_at_drop.clear();
  Tensor m;
  {
    Installed on(counter);
    m = autograd::mul(w, w);
  }
  const std::shared_ptr<Node> mul_node = grad_fn(m);
  counter->on_drop = [&] { released_at_drop.push_back(mul_node->released()); };
  backward(sum(m));
  CHECK(released_at_drop == std::vector<bool>{true, true});
  counter->on_drop = nullptr;
  // Dropping a graph without backward drops its tokens too.
  counter->saved = 0;
  {
    Installed on(counter);
    Tensor z = linear(x, w, Tensor());
    CHECK(counter->live == 1);
  }
  CHECK(counter->live == 0);
}

TEST_CASE("saved tensor observer: retain_graph keeps the saved weight for the next pass", "[autograd][saved]") {
  ObservedLinear l(3);
  auto& [x, w, counter, y] = l;
  backward(sum(y), Tensor(), /*retain_graph=*/true);
  CHECK(counter->live == 1);
  const Tensor first = grad(w).clone();
  backward(sum(y));  // the second pass still finds the weight, then frees it
  CHECK(counter->live == 0);
  CHECK(allclose(grad(w), first.add(first)));
}

TEST_CASE("saved tensor observer: a checkpoint is a use until its node is released", "[autograd][saved]") {
  Tensor x = random_leaf({4, 3}, 5);
  Tensor w = random_leaf({5, 3}, 6);
  auto counter = std::make_shared<AliasCounter>(w);
  counter->checkpoints_count = true;
  TensorList out;
  {
    Installed on(counter);
    out = checkpoint([&](const TensorList& in) { return TensorList{linear(in[0], w, Tensor())}; }, {x}, {w});
  }
  // The forward under checkpoint saved nothing; the node holds one token for its recomputation.
  CHECK(counter->live == 1);
  backward(sum(out[0]));
  CHECK(counter->live == 0);
  CHECK(grad(w).defined());
}

TEST_CASE("saved tensor observer: a removed or destroyed observer is skipped", "[autograd][saved]") {
  Tensor w = random_leaf({5, 3}, 7);
  Tensor x = random_leaf({4, 3}, 8);
  {
    auto counter = std::make_shared<AliasCounter>(w);
    add_saved_tensor_observer(counter);
    add_saved_tensor_observer(counter);  // once only
    const Tensor y = linear(x, w, Tensor());
    CHECK(counter->saved == 1);
  }  // destroyed while installed: forgotten on the next save
  const Tensor y = linear(x, w, Tensor());
  remove_saved_tensor_observer(nullptr);
  SUCCEED("no observer left to call");
}

}  // namespace braid::autograd
