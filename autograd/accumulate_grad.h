// The node at the end of every path to a leaf that requires grad: it runs the leaf's tensor hooks, adds the
// gradient into the leaf's .grad (or the backward pass's GradSink), then runs post-accumulate hooks.
// One per leaf, created on first use and shared by every graph that uses the leaf.
//
// Concurrent passes through one leaf run its tensor hooks concurrently (they may start another backward
// through this leaf), but accumulate and run the post-accumulate hooks one at a time, so each such hook
// sees the value its own accumulation produced.
#pragma once

#include <mutex>

#include "autograd/node.h"

namespace braid::autograd {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf);
  std::string name() const override { return "AccumulateGrad"; }
  // Accumulators are never released: they hold no saved state and outlive any one graph.
  void release_variables() override {}
  const Tensor& leaf() const { return leaf_; }

 protected:
  TensorList apply(TensorList&& grads) override;

 private:
  Tensor leaf_;
  std::mutex accumulate_mu_;  // held while accumulating and running post-accumulate hooks
};

}  // namespace braid::autograd
