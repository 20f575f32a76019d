// The MixtureOfExperts of torch's common_fsdp.py: Sequential(Linear(8, 12), shared Linear(12, 23), expert
// Linear(23, 12), Linear(12, 8)) under the child "module".
//
// Each rank has an expert of its own: its values are drawn from seed 42 + rank, everything else from seed
// 0, so the other layers are equal on every rank. Under FSDP the expert becomes a unit over a one-rank
// group of its own (common_fsdp's new_group([rank])): it is never sharded and its gradient is never
// averaged with the other ranks'; `shared` is a unit over the whole group and the root takes the first
// and last Linear. Without FSDP common_fsdp averages the gradients of every parameter except the experts'
// over the ranks by hand (its run_backward), which is what the reference in fsdp_moe_test.cc does.
//
// delay_before_free_ms (common_fsdp's delay before resharding the expert): a forward hook registered on the
// expert before fully_shard runs before FSDP's post-forward hook, so it sleeps right before the reshard.
#pragma once

#include <chrono>
#include <memory>
#include <thread>

#include "nn/container.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "tensor/random.h"

namespace braid::mp {

class MixtureOfExperts : public nn::Module {
 public:
  static constexpr int64_t kExpert = 23;
  static constexpr int64_t kShared = 12;
  static constexpr int64_t kInput = 8;

  explicit MixtureOfExperts(int rank, int delay_before_free_ms = 0) : nn::Module("MixtureOfExperts") {
    Generator expert_gen(42 + static_cast<uint64_t>(rank));
    expert = std::make_shared<nn::Linear>(kExpert, kShared, true, &expert_gen);
    Generator gen(0);
    shared = std::make_shared<nn::Linear>(kShared, kExpert, true, &gen);
    auto first = std::make_shared<nn::Linear>(kInput, kShared, true, &gen);
    auto last = std::make_shared<nn::Linear>(kShared, kInput, true, &gen);
    using Children = std::initializer_list<std::shared_ptr<nn::Module>>;
    module = register_module("module", std::make_shared<nn::Sequential>(Children{first, shared, expert, last}));
    if (delay_before_free_ms > 0) {
      expert->add_forward_hook([delay_before_free_ms](nn::Module&, const nn::TensorList&, nn::TensorList&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_before_free_ms));
      });
    }
  }

  Tensor forward(const Tensor& x) override { return (*module)(x); }

  // Whether `p` is one of this rank's expert parameters (common_fsdp's `p.expert = True`).
  bool is_expert(const Tensor& p) const {
    for (const Tensor& e : expert->parameters()) {
      if (e.unsafe_impl() == p.unsafe_impl()) return true;
    }
    return false;
  }

  std::shared_ptr<nn::Sequential> module;
  std::shared_ptr<nn::Linear> shared, expert;
};

}  // namespace braid::mp
