#include "parallel/fsdp/unit_registry.h"

#include <mutex>
#include <unordered_map>

#include "base/check.h"
#include "base/error.h"
#include "parallel/fsdp/fsdp_unit.h"

namespace braid::parallel::fsdp {

namespace {

struct Registry {
  std::mutex mu;
  std::unordered_map<const nn::Module*, std::weak_ptr<FSDPUnit>> by_module;
  std::unordered_map<const TensorImpl*, std::weak_ptr<FSDPUnit>> by_param;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::shared_ptr<FSDPUnit> unit_of_module(const nn::Module& module) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_module.find(&module);
  return it == r.by_module.end() ? nullptr : it->second.lock();
}

std::shared_ptr<FSDPUnit> unit_of_parameter(const Tensor& param) {
  if (!param.defined()) return nullptr;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_param.find(param.unsafe_impl());
  return it == r.by_param.end() ? nullptr : it->second.lock();
}

namespace detail {

void register_unit(const std::shared_ptr<FSDPUnit>& unit) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (auto it = r.by_module.find(&unit->module()); it != r.by_module.end() && !it->second.expired()) {
    BRAID_THROW(InvalidArgument, "fully_shard: module '{}' ({}) is already an FSDP unit", unit->name(),
                unit->module().type_name());
  }
  for (const auto& [name, p] : unit->managed_parameters()) {
    if (auto it = r.by_param.find(p.unsafe_impl()); it != r.by_param.end()) {
      if (auto other = it->second.lock()) {
        BRAID_THROW(InvalidArgument,
                    "fully_shard: parameter '{}' of unit '{}' is already managed by unit '{}'; a parameter shared "
                    "by several modules (tied weights) must belong to one unit: apply fully_shard to their "
                    "common parent only",
                    name, unit->name(), other->name());
      }
    }
  }
  r.by_module[&unit->module()] = unit;
  for (const auto& [name, p] : unit->managed_parameters()) r.by_param[p.unsafe_impl()] = unit;
}

void unregister_unit(const FSDPUnit* unit) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (auto it = r.by_module.find(&unit->module()); it != r.by_module.end() && it->second.expired()) {
    r.by_module.erase(it);
  }
  for (const auto& [name, p] : unit->managed_parameters()) {
    if (auto it = r.by_param.find(p.unsafe_impl()); it != r.by_param.end() && it->second.expired()) {
      r.by_param.erase(it);
    }
  }
}

}  // namespace detail

}  // namespace braid::parallel::fsdp
