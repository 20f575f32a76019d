// PostBackwardNode: the autograd node through which a unit's parameters receive their gradients.
//
// One node per forward of a unit. While the forward runs, each managed parameter that requires grad has
// this node as grad_fn (input i = parameter i), so every op that uses the full parameter sends its
// gradient here; the engine sums them and runs the node once all of them arrived. Its outputs go to each
// parameter's AccumulateGrad: the node reduces (FSDPUnit::post_backward) and returns shard gradients.
#pragma once

#include <memory>
#include <string>

#include "autograd/node.h"

namespace braid::parallel::fsdp {

class FSDPUnit;

class PostBackwardNode final : public autograd::Node {
 public:
  PostBackwardNode(std::weak_ptr<FSDPUnit> unit, std::vector<autograd::Edge> edges);
  std::string name() const override { return "FSDPPostBackward"; }

 protected:
  autograd::TensorList apply(autograd::TensorList&& grads) override;

 private:
  std::weak_ptr<FSDPUnit> unit_;
};

}  // namespace braid::parallel::fsdp
