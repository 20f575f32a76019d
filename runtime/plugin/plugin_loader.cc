// The loader: dlopen, the handshake, registration through a Registrar, and the all-or-nothing commit into
// the model, loss, data-kind and comm-hook tables.
#include "runtime/plugin/plugin_loader.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <set>
#include <utility>

#include "base/check.h"
#include "base/logging.h"
#include "runtime/plugin/plugin.h"

namespace braid::runtime {

namespace {

namespace fs = std::filesystem;

std::mutex g_mu;
std::vector<LoadedPlugin> g_loaded;  // GUARDED_BY(g_mu); libraries are never closed

std::string by(const std::string& named_by) { return named_by.empty() ? std::string() : " (" + named_by + ")"; }

// The address of `symbol` in `handle`, or nullptr. dlerror() is cleared first so that a stale message
// cannot be mistaken for this lookup's.
void* find_symbol(void* handle, const char* symbol) {
  dlerror();
  return dlsym(handle, symbol);
}

void check_handshake(const std::string& path, const plugin::PluginInfo* info) {
  BRAID_CHECK_ARG(info != nullptr, "plugin {}: braid_plugin_info() returned nothing", path);
  const std::string theirs = info->braid_version != nullptr ? info->braid_version : "(none)";
  const bool same = theirs == BRAID_VERSION && info->plugin_abi == plugin::kPluginAbi &&
                    info->cxx_abi == static_cast<uint32_t>(__GXX_ABI_VERSION);
  BRAID_CHECK_ARG(same,
                  "plugin {} was built against braid {} (plugin ABI {}, C++ ABI {}), but this is braid {} (plugin "
                  "ABI {}, C++ ABI {}): rebuild the plugin against braid {}",
                  path, theirs, info->plugin_abi, info->cxx_abi, BRAID_VERSION, plugin::kPluginAbi,
                  __GXX_ABI_VERSION, BRAID_VERSION);
}

// Adds everything the registrar holds to braid's tables, after checking that every name is new, so that a
// refused plugin leaves no half of itself behind.
LoadedPlugin commit(plugin::Registrar& r, const plugin::PluginInfo& info) {
  const std::string& path = r.path();
  std::set<std::string> seen;
  auto check_name = [&](const std::string& what, const std::string& name, bool taken) {
    BRAID_CHECK_ARG(!name.empty(), "plugin {}: registers a {} without a name", path, what);
    BRAID_CHECK_ARG(seen.insert(what + "/" + name).second, "plugin {}: registers {} '{}' twice", path, what, name);
    BRAID_CHECK_ARG(!taken, "plugin {}: registers {} '{}', but braid already has one by that name{}", path, what,
                    name, [&] {
                      const std::string o = what == "model"  ? model_origin(name)
                                            : what == "loss" ? loss_origin(name)
                                            : what == "comm hook" ? comm_hook_origin(name)
                                                                  : dataset_origin(name);
                      return o.empty() ? std::string(" (built in)") : fmt::format(" (from plugin {})", o);
                    }());
  };
  for (const auto& d : r.models()) {
    check_name("model", d.name, find_model(d.name) != nullptr);
    BRAID_CHECK_ARG(d.build != nullptr, "plugin {}: model '{}' has no build function", path, d.name);
  }
  for (const auto& d : r.losses()) {
    check_name("loss", d.name, find_loss(d.name) != nullptr);
    BRAID_CHECK_ARG(d.compute != nullptr, "plugin {}: loss '{}' has no compute function", path, d.name);
  }
  for (const auto& d : r.datasets()) {
    check_name("data kind", d.name, data_kind_taken(d.name));
    BRAID_CHECK_ARG(d.make != nullptr, "plugin {}: data kind '{}' has no make function", path, d.name);
  }
  for (const auto& d : r.comm_hooks()) {
    check_name("comm hook", d.name, find_comm_hook(d.name) != nullptr);
    BRAID_CHECK_ARG(d.make != nullptr, "plugin {}: comm hook '{}' has no make function", path, d.name);
  }

  LoadedPlugin out{path, info.name != nullptr ? info.name : "", info.version != nullptr ? info.version : "", {}, {}, {}, {}};
  // Every name was checked above: nothing below throws, so the plugin is registered whole.
  for (auto& d : r.datasets()) {
    out.datasets.push_back(d.name);
    register_dataset(std::move(d), path);
  }
  for (auto& d : r.models()) {
    out.models.push_back(d.name);
    register_model(std::move(d), path);
  }
  for (auto& d : r.losses()) {
    out.losses.push_back(d.name);
    register_loss(std::move(d), path);
  }
  for (auto& d : r.comm_hooks()) {
    out.comm_hooks.push_back(d.name);
    register_comm_hook(std::move(d), path);
  }
  return out;
}

}  // namespace

LoadedPlugin load_plugin(const std::string& given, const std::string& named_by) {
  std::error_code ec;
  BRAID_CHECK_ARG(fs::is_regular_file(given, ec), "plugin {}{}: no such file", given, by(named_by));
  const std::string path = fs::canonical(given, ec).string();
  BRAID_CHECK_ARG(!ec, "plugin {}{}: cannot resolve the path: {}", given, by(named_by), ec.message());

  std::lock_guard<std::mutex> lock(g_mu);
  for (const LoadedPlugin& p : g_loaded) {
    if (p.path == path) return p;
  }
  // RTLD_NOW: a missing symbol is an error here, not a crash in the middle of a job. RTLD_LOCAL: two plugins
  // may use the same helper names. The handle is never closed (plugin.h: lifetime).
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    const std::string why = err != nullptr ? err : "unknown error";
    const bool braid_lib = why.find("libbraid_") != std::string::npos;
    BRAID_THROW(InvalidArgument, "plugin {}{}: cannot load it: {}{}", path, by(named_by), why,
                braid_lib ? fmt::format(" (a plugin built against another braid version? this is braid {})",
                                        BRAID_VERSION)
                          : std::string());
  }
  auto info_fn = reinterpret_cast<braid_plugin_info_fn>(find_symbol(handle, "braid_plugin_info"));
  BRAID_CHECK_ARG(info_fn != nullptr,
                  "plugin {}{}: not a braid plugin: it has no braid_plugin_info entry point (a plugin defines "
                  "its entry points with BRAID_PLUGIN from runtime/plugin/plugin.h)",
                  path, by(named_by));
  const plugin::PluginInfo* info = info_fn();
  check_handshake(path, info);
  auto register_fn = reinterpret_cast<braid_plugin_register_fn>(find_symbol(handle, "braid_plugin_register"));
  BRAID_CHECK_ARG(register_fn != nullptr,
                  "plugin {} ({} {}): missing entry point braid_plugin_register (BRAID_PLUGIN defines it)", path,
                  info->name != nullptr ? info->name : "?", info->version != nullptr ? info->version : "?");

  plugin::Registrar registrar(path);
  try {
    register_fn(&registrar);
  } catch (const std::exception& e) {
    BRAID_THROW(InvalidArgument, "plugin {}: its registration threw: {}", path, e.what());
  }
  LoadedPlugin loaded = commit(registrar, *info);
  logging::get("braid.plugin")->debug("loaded {}", describe(loaded));
  g_loaded.push_back(loaded);
  return loaded;
}

std::vector<LoadedPlugin> loaded_plugins() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_loaded;
}

std::vector<LoadedPlugin> load_job_plugins(const JobSpec& job) {
  const std::string file = job.file.empty() ? std::string("the job") : job.file;
  std::vector<LoadedPlugin> out;
  for (size_t i = 0; i < job.plugins.size(); ++i) {
    out.push_back(load_plugin(job.plugins[i], fmt::format("plugins[{}] in {}", i, file)));
  }
  if (!job.model.plugin.empty()) {
    LoadedPlugin p = load_plugin(job.model.plugin, fmt::format("model.plugin in {}", file));
    const bool has = std::find(p.models.begin(), p.models.end(), job.model.kind) != p.models.end();
    if (!has) {
      const std::string registers = p.models.empty() ? std::string("no model at all")
                                                     : fmt::format("{}", fmt::join(p.models, ", "));
      try {
        get_model(job.model.kind);  // an unknown kind: its message lists every model, the plugins' included
      } catch (const InvalidArgument& e) {
        BRAID_THROW(InvalidArgument, "{}: {}; plugin {} (model.plugin) registers {}", file, e.what(), p.path, registers);
      }
      // Another library registers the kind; model.plugin says which one should.
      BRAID_THROW(InvalidArgument, "{}: model.kind: plugin {} registers no model '{}' (it registers {}); '{}' comes "
                  "from {}", file, p.path, job.model.kind, registers, job.model.kind,
                  model_origin(job.model.kind).empty() ? std::string("braid itself")
                                                       : "plugin " + model_origin(job.model.kind));
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::string describe(const LoadedPlugin& p) {
  std::string out = fmt::format("{} {} ({})", p.name, p.version, p.path);
  std::vector<std::string> parts;
  auto add = [&](const char* what, const std::vector<std::string>& names) {
    if (!names.empty()) parts.push_back(fmt::format("{} {}", what, fmt::join(names, ", ")));
  };
  add("models", p.models);
  add("losses", p.losses);
  add("data kinds", p.datasets);
  add("comm hooks", p.comm_hooks);
  return parts.empty() ? out + ": registers nothing" : fmt::format("{}: {}", out, fmt::join(parts, "; "));
}

}  // namespace braid::runtime
