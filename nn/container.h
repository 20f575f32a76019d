// Containers: nn::Sequential (children run in order, named "0", "1", ... as torch.nn.Sequential) and
// nn::MLP, a Sequential of Linear layers with ReLU between them.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "nn/module.h"
#include "tensor/random.h"

namespace braid::nn {

class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);

  // Appends `module` as child str(size()).
  void push_back(std::shared_ptr<Module> module);
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  // The i-th child; a negative i counts from the end. Throws for out of range.
  std::shared_ptr<Module> operator[](int64_t i) const;

  // Feeds each child's outputs to the next through operator(), so the children's hooks run. An empty
  // Sequential is the identity.
  Tensor forward(const Tensor& input) override;
  TensorList forward_many(const TensorList& inputs) override;

 protected:
  explicit Sequential(std::string type_name) : Module(std::move(type_name)) {}

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

// A list of children named "0", "1", ... that does not run them itself (torch.nn.ModuleList): its owner
// calls each with the inputs it needs (masks, memory), which Sequential's one-input chain cannot pass.
class ModuleList : public Sequential {
 public:
  ModuleList() : Sequential("ModuleList") {}
  Tensor forward(const Tensor& input) override;
  TensorList forward_many(const TensorList& inputs) override;
};

// sizes {d0, d1, ..., dn}: Linear(d0, d1), ReLU, Linear(d1, d2), ReLU, ..., Linear(d(n-1), dn), named "0",
// "1", ... like the equivalent torch.nn.Sequential (so its state dicts load into one). Needs at least two
// sizes. Weights are drawn layer by layer from `gen` (or the default generator).
class MLP : public Sequential {
 public:
  explicit MLP(const std::vector<int64_t>& sizes, bool bias = true, Generator* gen = nullptr);
};

}  // namespace braid::nn
