// nn::CheckpointWrapper: a model with wrapped blocks (dropout included) trains exactly like the plain one,
// and the wrapper's structure (names, hooks in the recomputation) is as documented.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/variable.h"
#include "nn/activation.h"
#include "nn/checkpoint_wrapper.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tensor/random.h"

namespace braid::nn {
namespace {

// Linear, ReLU, Dropout(0.3): a block whose backward depends on the dropout mask.
std::shared_ptr<Module> block(int64_t in, int64_t out, Generator& gen) {
  return std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Linear>(in, out, true, &gen), std::make_shared<ReLU>(), std::make_shared<Dropout>(0.3)});
}

// Three blocks; `wrapped` puts the first two in checkpoint wrappers (the second wrapper inside another,
// to check that checkpoints nest).
std::shared_ptr<Sequential> model(bool wrapped) {
  Generator gen(3);
  auto b0 = block(8, 16, gen), b1 = block(16, 16, gen), b2 = block(16, 4, gen);
  if (wrapped) {
    b0 = std::make_shared<CheckpointWrapper>(b0);
    b1 = std::make_shared<CheckpointWrapper>(std::make_shared<CheckpointWrapper>(b1));
  }
  return std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{b0, b1, b2});
}

std::string without_wrapper_prefix(std::string name) {
  const std::string prefix = std::string(CheckpointWrapper::kChildName) + ".";
  for (size_t at; (at = name.find(prefix)) != std::string::npos;) name.erase(at, prefix.size());
  return name;
}

TEST_CASE("CheckpointWrapper: training with dropout equals the plain model", "[nn][checkpoint]") {
  auto plain = model(false);
  auto ckpt = model(true);
  const auto p_plain = plain->named_parameters();
  const auto p_ckpt = ckpt->named_parameters();
  REQUIRE(p_plain.size() == p_ckpt.size());
  for (size_t i = 0; i < p_plain.size(); ++i) CHECK(without_wrapper_prefix(p_ckpt[i].first) == p_plain[i].first);
  CHECK(p_ckpt[0].first == "0._checkpoint_wrapped_module.0.weight");

  Generator data(5);
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    const Tensor x = rand({6, 8}, {}, &data);
    const Tensor y = rand({6, 4}, {}, &data);
    Tensor losses[2];
    for (int which = 0; which < 2; ++which) {
      manual_seed(100 + step);  // same dropout masks for both models
      auto& m = which == 0 ? plain : ckpt;
      m->zero_grad();
      losses[which] = autograd::mse_loss((*m)(x), y);
      autograd::backward(losses[which]);
    }
    CHECK(allclose(losses[0], losses[1], 1e-6, 1e-7));
    for (size_t i = 0; i < p_plain.size(); ++i) {
      INFO(p_plain[i].first);
      CHECK(allclose(autograd::grad(p_plain[i].second), autograd::grad(p_ckpt[i].second), 1e-5, 1e-7));
    }
  }
}

TEST_CASE("CheckpointWrapper: the wrapped module's hooks run again in the recomputation", "[nn][checkpoint]") {
  Generator gen(1);
  auto linear = std::make_shared<Linear>(4, 2, true, &gen);
  std::vector<bool> recomputing;
  linear->add_forward_pre_hook(
      [&](Module&, TensorList&) { recomputing.push_back(autograd::in_checkpoint_recompute()); });
  CheckpointWrapper wrapper(linear);
  const Tensor x = ones({3, 4});
  const Tensor out = wrapper(x);
  CHECK(recomputing == std::vector<bool>{false});
  autograd::backward(autograd::mse_loss(out, zeros({3, 2})));
  CHECK(recomputing == std::vector<bool>{false, true});
  CHECK(autograd::grad(linear->weight()).defined());
  CHECK_THROWS_AS(CheckpointWrapper(nullptr), InvalidArgument);
}

}  // namespace
}  // namespace braid::nn
