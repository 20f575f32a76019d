#include "rpc/registry.h"

#include <fmt/format.h>

#include <algorithm>

namespace braid::rpc {

void Registry::check_new_name(const std::string& name) const {
  BRAID_CHECK_ARG(!name.empty(), "rpc registry: a function or class needs a non-empty name");
  BRAID_CHECK_ARG(functions_.find(name) == functions_.end() && classes_.find(name) == classes_.end(),
                  "rpc registry: the name '{}' is already registered", name);
}

void Registry::add_function(const std::string& name, SyncFunction fn) {
  BRAID_CHECK_ARG(fn != nullptr, "rpc registry: function '{}' is empty", name);
  std::unique_lock lock(mu_);
  check_new_name(name);
  functions_.emplace(name, std::make_shared<const Callable>(std::move(fn)));
}

void Registry::add_async_function(const std::string& name, AsyncFunction fn) {
  BRAID_CHECK_ARG(fn != nullptr, "rpc registry: async function '{}' is empty", name);
  std::unique_lock lock(mu_);
  check_new_name(name);
  functions_.emplace(name, std::make_shared<const Callable>(std::move(fn)));
}

std::shared_ptr<ClassEntry> Registry::add_class_entry(const std::string& name) {
  std::unique_lock lock(mu_);
  check_new_name(name);
  auto entry = std::make_shared<ClassEntry>();
  entry->name = name;
  classes_.emplace(name, entry);
  return entry;
}

void Registry::add_method(ClassEntry& entry, const std::string& name, Method m) {
  std::unique_lock lock(mu_);
  BRAID_CHECK_ARG(!name.empty(), "rpc registry: class '{}': a method needs a non-empty name", entry.name);
  BRAID_CHECK_ARG(entry.methods.find(name) == entry.methods.end(),
                  "rpc registry: class '{}' already has a method '{}'", entry.name, name);
  entry.methods.emplace(name, std::move(m));
}

std::shared_ptr<const Callable> Registry::find_function(const std::string& name) const {
  std::shared_lock lock(mu_);
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : it->second;
}

std::shared_ptr<const ClassEntry> Registry::find_class(const std::string& name) const {
  std::shared_lock lock(mu_);
  auto it = classes_.find(name);
  return it == classes_.end() ? nullptr : it->second;
}

std::optional<Method> Registry::find_method(const ClassEntry& entry, const std::string& name) const {
  std::shared_lock lock(mu_);
  auto it = entry.methods.find(name);
  if (it == entry.methods.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Registry::names() const {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [n, f] : functions_) out.push_back(n);
  for (const auto& [n, c] : classes_) out.push_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

Registry& global_registry() {
  static Registry registry;
  return registry;
}

}  // namespace braid::rpc
