// Where a backward pass puts the gradients of leaves. The default writes into each leaf's .grad;
// distributed autograd supplies a sink per context so that gradients stay in the context ("not in .grad"),
// and gradcheck/grad() use a sink that captures them.
#pragma once

#include "tensor/tensor.h"

namespace braid::autograd {

class GradSink {
 public:
  virtual ~GradSink() = default;
  // Adds `grad` to what the sink holds for `leaf` and returns the accumulated gradient, which the leaf's
  // post-accumulate hooks then see; returning an undefined tensor means nothing was accumulated and no
  // post-accumulate hook fires (grad() does that). Called from the backward pass's thread; a sink shared
  // by concurrent passes must synchronise itself.
  virtual Tensor accumulate(const Tensor& leaf, const Tensor& grad) = 0;
  // Whether the leaf's tensor hooks run before accumulate(). A sink that only carries gradients on to
  // another pass (activation checkpointing's recomputation) says no: they run once, in that pass.
  virtual bool runs_tensor_hooks() const { return true; }
};

}  // namespace braid::autograd
