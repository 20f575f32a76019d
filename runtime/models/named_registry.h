// A process-wide table of definitions by name, for the things a job file names and a plugin may add:
// losses, comm hooks, data kinds (models have their own table, model_registry.cc, for their built-in
// checks). Each entry remembers where it came from ("" for braid's own, else the plugin's path), so that
// errors can list every known name with its origin and blame the right library.
//
// Entries are never removed: a pointer returned by find() stays valid for the life of the process, and a
// plugin's code that a definition points into stays loaded (runtime/plugin/plugin_loader.h never unloads).
#pragma once

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"

namespace braid::runtime {

template <typename Definition>
class NamedRegistry {
 public:
  struct Entry {
    Definition definition;
    std::string origin;  // "" built in; else the plugin's path
  };

  // `what` names the kind of thing in messages ("loss", "comm hook").
  explicit NamedRegistry(std::string what) : what_(std::move(what)) {}

  // InvalidArgument for an empty or taken name, naming who has it.
  void add(const std::string& name, Definition definition, std::string origin = {}) {
    BRAID_CHECK_ARG(!name.empty(), "register {}: the name is empty{}", what_, from(origin));
    std::unique_lock<std::shared_mutex> lock(mu_);
    const auto it = entries_.find(name);
    BRAID_CHECK_ARG(it == entries_.end(), "register {}: '{}'{} is already registered{}", what_, name, from(origin),
                    it == entries_.end() ? std::string() : by(it->second.origin));
    entries_.emplace(name, Entry{std::move(definition), std::move(origin)});
  }

  const Entry* find(const std::string& name) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    const auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second;
  }

  const Definition* definition(const std::string& name) const {
    const Entry* e = find(name);
    return e == nullptr ? nullptr : &e->definition;
  }

  // "" for braid's own entries and for unknown names.
  std::string origin(const std::string& name) const {
    const Entry* e = find(name);
    return e == nullptr ? std::string() : e->origin;
  }

  std::vector<std::string> names() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& [name, e] : entries_) out.push_back(name);
    return out;
  }

  // "cross_entropy, mse, my_loss (plugin libmy.so)": every name, sorted, plugins' marked.
  std::string describe_known() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    std::vector<std::string> parts;
    for (const auto& [name, e] : entries_) parts.push_back(name + marked(e.origin));
    return fmt::format("{}", fmt::join(parts, ", "));
  }

  // " (plugin libmy.so)" for a plugin's entry, "" for braid's own.
  static std::string marked(const std::string& origin) {
    return origin.empty() ? std::string() : fmt::format(" (plugin {})", std::filesystem::path(origin).filename().string());
  }

 private:
  static std::string from(const std::string& origin) {
    return origin.empty() ? std::string() : fmt::format(" from plugin {}", origin);
  }
  static std::string by(const std::string& origin) {
    return origin.empty() ? std::string(" (built in)") : fmt::format(" (by plugin {})", origin);
  }

  std::string what_;
  mutable std::shared_mutex mu_;
  std::map<std::string, Entry> entries_;  // GUARDED_BY(mu_)
};

}  // namespace braid::runtime
