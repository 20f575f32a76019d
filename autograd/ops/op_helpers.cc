#include "autograd/ops/op_helpers.h"

#include "autograd/grad_mode.h"
#include "tensor/ops/reduce.h"

namespace braid::autograd::detail {

std::vector<bool> needs_grad(const std::vector<Tensor>& inputs) {
  std::vector<bool> needs(inputs.size(), false);
  if (!GradMode::is_enabled()) return needs;
  for (size_t i = 0; i < inputs.size(); ++i) needs[i] = inputs[i].defined() && requires_grad(inputs[i]);
  return needs;
}

namespace {
std::shared_ptr<FunctionNode> make_node(const std::string& name, const std::vector<Tensor>& inputs,
                                        std::vector<SavedTensor> saved, FunctionNode::Backward backward) {
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) edges.push_back(t.defined() ? gradient_edge(t) : Edge{});
  return std::make_shared<FunctionNode>(name, std::move(edges), std::move(saved), std::move(backward));
}
}  // namespace

Tensor record(const std::string& name, const std::vector<Tensor>& inputs, const Tensor& out,
              std::vector<SavedTensor> saved, FunctionNode::Backward backward) {
  if (!any_requires_grad(inputs)) return out;
  auto node = make_node(name, inputs, std::move(saved), std::move(backward));
  return set_history(out, node, 0);
}

std::vector<Tensor> record_multi(const std::string& name, const std::vector<Tensor>& inputs,
                                 const std::vector<Tensor>& outs, std::vector<SavedTensor> saved,
                                 FunctionNode::Backward backward) {
  if (!any_requires_grad(inputs)) return outs;
  auto node = make_node(name, inputs, std::move(saved), std::move(backward));
  node->set_num_inputs(static_cast<uint32_t>(outs.size()));
  std::vector<Tensor> result;
  result.reserve(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) result.push_back(set_history(outs[i], node, static_cast<uint32_t>(i)));
  return result;
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  Shape dims;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && grad.shape()[d] != 1)) dims.push_back(d);
  }
  Tensor r = dims.empty() ? grad : braid::sum(grad, dims, /*keepdim=*/true);
  return r.reshape(shape);
}

}  // namespace braid::autograd::detail
