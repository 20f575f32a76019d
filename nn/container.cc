#include "nn/container.h"

#include <string>
#include <utility>

#include "base/check.h"
#include "nn/activation.h"
#include "nn/linear.h"

namespace braid::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) : Module("Sequential") {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

std::shared_ptr<Module> Sequential::operator[](int64_t i) const {
  const auto n = static_cast<int64_t>(modules_.size());
  BRAID_CHECK_ARG(i >= -n && i < n, "{}: index {} is out of range for {} modules", type_name(), i, n);
  return modules_[static_cast<size_t>(i < 0 ? i + n : i)];
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (auto& m : modules_) x = (*m)(x);
  return x;
}

TensorList Sequential::forward_many(const TensorList& inputs) {
  // One tensor in goes through forward(), so that a subclass overriding forward() alone still works.
  if (inputs.size() == 1) return {forward(inputs[0])};
  TensorList x = inputs;
  for (auto& m : modules_) x = (*m)(x);
  return x;
}

MLP::MLP(const std::vector<int64_t>& sizes, bool bias, Generator* gen) : Sequential("MLP") {
  BRAID_CHECK_ARG(sizes.size() >= 2, "MLP: needs at least an input and an output size, got {} sizes", sizes.size());
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    push_back(std::make_shared<Linear>(sizes[i], sizes[i + 1], bias, gen));
    if (i + 2 < sizes.size()) push_back(std::make_shared<ReLU>());
  }
}

Tensor ModuleList::forward(const Tensor&) {
  BRAID_THROW(InvalidArgument, "ModuleList: is not callable; call its children");
}

TensorList ModuleList::forward_many(const TensorList&) {
  BRAID_THROW(InvalidArgument, "ModuleList: is not callable; call its children");
}

}  // namespace braid::nn
