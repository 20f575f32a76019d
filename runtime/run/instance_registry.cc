#include "runtime/run/instance_registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "base/check.h"
#include "rpc/api.h"

namespace braid::runtime {

using rpc::Args;
using rpc::Value;

namespace {

std::mutex g_mu;
std::map<std::string, rpc::RRef> g_instances;  // GUARDED_BY(g_mu)

std::string joined_names() {
  std::string out;
  for (const auto& [name, rref] : g_instances) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none" : out;
}

}  // namespace

void register_instance(const std::string& name, const rpc::RRef& rref) {
  BRAID_CHECK_ARG(!name.empty() && rref.defined(), "register_instance: an empty name or an undefined RRef");
  std::lock_guard<std::mutex> lock(g_mu);
  BRAID_CHECK_ARG(g_instances.emplace(name, rref).second, "register_instance: '{}' is registered already", name);
}

rpc::RRef find_instance(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mu);
  const auto it = g_instances.find(name);
  BRAID_CHECK_ARG(it != g_instances.end(), "no model instance '{}' on worker '{}' (it holds: {})", name,
                  rpc::is_initialized() ? rpc::get_worker_info().name : std::string("?"), joined_names());
  return it->second;
}

std::vector<std::string> instance_names() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<std::string> names;
  for (const auto& [name, rref] : g_instances) names.push_back(name);
  return names;
}

void clear_instances() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_instances.clear();
}

rpc::RRef lookup_instance(const std::string& worker, const std::string& name) {
  return rpc::rpc_sync(worker, "braid.lookup_instance", {Value(name)}).as_rref();
}

void register_instance_functions() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = rpc::global_registry();
    r.add_function("braid.register_instance", [](const Args& a) {
      register_instance(a.at(0).as_string(), a.at(1).as_rref());
      return Value();
    });
    r.add_function("braid.lookup_instance", [](const Args& a) { return Value(find_instance(a.at(0).as_string())); });
    r.add_function("braid.instances", [](const Args&) {
      rpc::ValueList names;
      for (const auto& n : instance_names()) names.emplace_back(n);
      return rpc::list(std::move(names));
    });
  });
}

}  // namespace braid::runtime
