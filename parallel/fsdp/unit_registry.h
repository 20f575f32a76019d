// Which modules are FSDP units and which unit manages each parameter, process-wide.
//
// fully_shard() is applied bottom-up, so a parent must know which submodules (and so which parameters)
// already belong to a unit; clip_grad_norm_ must know, per parameter, whether its gradient is a shard
// and over which group. nn::Module has no slot for such state, so the units register here (weakly:
// a module owns its unit through the hooks fully_shard installs, and the unit unregisters when destroyed).
//
// Thread-safety: all functions are safe to call concurrently.
#pragma once

#include <memory>

#include "nn/module.h"

namespace braid::parallel::fsdp {

class FSDPUnit;

// The unit fully_shard(module) created, or null.
std::shared_ptr<FSDPUnit> unit_of_module(const nn::Module& module);
// The unit managing `param` (any handle of the parameter), or null.
std::shared_ptr<FSDPUnit> unit_of_parameter(const Tensor& param);

namespace detail {
// Throws InvalidArgument when `unit`'s module or one of its parameters already has a unit.
void register_unit(const std::shared_ptr<FSDPUnit>& unit);
void unregister_unit(const FSDPUnit* unit);
}  // namespace detail

}  // namespace braid::parallel::fsdp
