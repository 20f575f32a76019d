#include "parallel/fsdp/post_backward_node.h"

#include "base/check.h"
#include "base/error.h"
#include "parallel/fsdp/fsdp_unit.h"

namespace braid::parallel::fsdp {

PostBackwardNode::PostBackwardNode(std::weak_ptr<FSDPUnit> unit, std::vector<autograd::Edge> edges)
    : autograd::Node(std::move(edges)), unit_(std::move(unit)) {
  set_num_inputs(static_cast<uint32_t>(next_edges().size()));
}

autograd::TensorList PostBackwardNode::apply(autograd::TensorList&& grads) {
  auto unit = unit_.lock();
  BRAID_CHECK_ARG(unit != nullptr, "FSDPPostBackward: the FSDP unit (and its module) was destroyed before backward");
  return unit->post_backward(grads);
}

}  // namespace braid::parallel::fsdp
