// Building blocks for differentiable ops (autograd/ops/*.cc): each op computes its forward with the raw
// tensor ops, then, when an input requires grad, records a FunctionNode whose rule lives right there.
#pragma once

#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/variable.h"

namespace braid::autograd::detail {

// Which of `inputs` need a gradient (grad mode on and the input requires grad).
std::vector<bool> needs_grad(const std::vector<Tensor>& inputs);

// Records `out` as the result of an op named `name` over `inputs`; the rule gets the output gradient(s)
// and the saved tensors and returns one gradient per input (undefined where none is needed).
// Returns `out` unchanged when no input requires grad.
Tensor record(const std::string& name, const std::vector<Tensor>& inputs, const Tensor& out,
              std::vector<SavedTensor> saved, FunctionNode::Backward backward);
// The same for ops with several outputs (split, chunk): every output shares one node.
std::vector<Tensor> record_multi(const std::string& name, const std::vector<Tensor>& inputs,
                                 const std::vector<Tensor>& outs, std::vector<SavedTensor> saved,
                                 FunctionNode::Backward backward);

// Sums `grad` over broadcast dimensions so that it has `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& grad, const Shape& shape);

}  // namespace braid::autograd::detail
