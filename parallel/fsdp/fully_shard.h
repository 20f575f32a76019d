// fully_shard(): PyTorch FSDP2's entry point. Applied to submodules first, then to the root, each call
// makes one unit of the module's parameters that no unit below it already manages.
//
//   auto group = collectives::default_group();
//   for (auto& [name, block] : model->named_children()) fsdp::fully_shard(*block, group);
//   fsdp::fully_shard(*model, group);            // the root: whatever parameters are left
//   nn::optim::SGD sgd(model->parameters(), {.lr = 0.1});   // shards: optimizer state is sharded too
//   autograd::backward(loss_fn((*model)(x)));   // call through operator(): the hooks run there
//   sgd.step();
//
// apply_fully_shard() does the bottom-up walk for a wrap policy (by module type, or by parameter count).
// fully_shard is collective over `group`: every member calls it for the same modules in the same order.
// It checks that all ranks have the same unit (names, shapes, dtype) and fails on every rank otherwise.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "collectives/core/process_group.h"
#include "nn/module.h"
#include "parallel/fsdp/fsdp_options.h"
#include "parallel/fsdp/fsdp_unit.h"

namespace braid::parallel::fsdp {

// Makes `module` a unit over `group` and returns it (the module's hooks own it; keep the module alive).
// `name` labels errors and logs; default: the module's type name. Throws InvalidArgument for a module
// that already is a unit, a parameter another unit manages (tied weights across units), mixed dtypes or
// devices, a 0-dimensional parameter, a null or non-member group, and a unit that differs across ranks.
std::shared_ptr<FSDPUnit> fully_shard(nn::Module& module, std::shared_ptr<collectives::ProcessGroup> group,
                                      FSDPOptions options = {}, std::string name = {});

// Whether a submodule becomes a unit: given the module, its dotted path from the root, and the number of
// its parameters that no unit below it manages yet.
using WrapPolicy = std::function<bool(const nn::Module& module, const std::string& path, int64_t unwrapped_numel)>;
// Wraps modules whose type_name() is one of `type_names` ("Linear", "TransformerBlock", ...).
WrapPolicy module_type_policy(std::set<std::string> type_names);
// Wraps a module when its not-yet-wrapped parameters hold at least `min_num_params` elements (torch's
// size_based_auto_wrap_policy).
WrapPolicy size_based_policy(int64_t min_num_params);

// Walks `root` bottom-up, calling fully_shard on each submodule the policy picks, then on the root.
// Returns the root's unit.
std::shared_ptr<FSDPUnit> apply_fully_shard(nn::Module& root, std::shared_ptr<collectives::ProcessGroup> group,
                                            const FSDPOptions& options, const WrapPolicy& policy);

}  // namespace braid::parallel::fsdp
