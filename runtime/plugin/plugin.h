// Plugins: shared libraries that bring their own models, losses, data kinds and DDP comm hooks to the
// stock `braid` executable. This is the one header a plugin includes (docs/PLUGINS.md):
//
//   #include "runtime/plugin/plugin.h"
//
//   BRAID_PLUGIN("my_net", "1.0") {
//     registrar.add_model({.name = "my_net", .help = "two layers", .arg_names = {"width"},
//                          .build = [](const braid::runtime::ModelBuild& b) { return make_my_net(b); }});
//   }
//
// built against an installed braid (find_package(braid) and braid::braid, or pkg-config braid) into
// libmy_net.so, and named by a job: `model: {plugin: libmy_net.so, kind: my_net}` or `plugins: [...]`.
//
// The handshake: the loader (plugin_loader.h) first calls braid_plugin_info(), which BRAID_PLUGIN
// defines with the braid version, plugin ABI and C++ ABI of the headers the plugin was compiled against.
// Plugins use braid's C++ types directly, so anything but an exact match of all three is refused, naming
// both versions. Only then does it call braid_plugin_register() with a Registrar; what the plugin adds
// joins braid's tables only if registration returns without throwing and every name is new.
//
// Lifetime and threads: a plugin is loaded once per process (the same file named twice is one plugin),
// before the job starts, on the main thread; it is never unloaded, since the definitions point into its
// code. The functions it registers run on braid's threads: build() and a dataset's make() once per
// trainer, a loss on the trainer's step thread, a comm hook on the backward pass's thread (its futures may
// complete anywhere).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/config.h"
#include "runtime/data/dataset_registry.h"
#include "runtime/models/comm_hook_registry.h"
#include "runtime/models/loss.h"
#include "runtime/models/model_registry.h"

namespace braid::plugin {

// Bumped whenever PluginInfo or Registrar change shape.
inline constexpr uint32_t kPluginAbi = 1;

// What braid_plugin_info() returns: plain data, read before any of the plugin's C++ runs.
struct PluginInfo {
  uint32_t plugin_abi;        // kPluginAbi of the headers the plugin was compiled against
  uint32_t cxx_abi;           // the compiler's __GXX_ABI_VERSION
  const char* braid_version;  // BRAID_VERSION of those headers
  const char* name;           // the plugin's own name and version, for messages and `braid check`
  const char* version;
};

// Collects what a plugin offers while braid_plugin_register() runs; the loader adds it all to braid's
// tables afterwards, or none of it.
class Registrar {
 public:
  explicit Registrar(std::string path) : path_(std::move(path)) {}

  void add_model(runtime::ModelDefinition definition) { models_.push_back(std::move(definition)); }
  void add_loss(runtime::LossDefinition definition) { losses_.push_back(std::move(definition)); }
  void add_dataset(runtime::DatasetDefinition definition) { datasets_.push_back(std::move(definition)); }
  void add_comm_hook(runtime::CommHookDefinition definition) { comm_hooks_.push_back(std::move(definition)); }

  // The plugin's file, as the loader opened it.
  const std::string& path() const { return path_; }

  std::vector<runtime::ModelDefinition>& models() { return models_; }
  std::vector<runtime::LossDefinition>& losses() { return losses_; }
  std::vector<runtime::DatasetDefinition>& datasets() { return datasets_; }
  std::vector<runtime::CommHookDefinition>& comm_hooks() { return comm_hooks_; }

 private:
  std::string path_;
  std::vector<runtime::ModelDefinition> models_;
  std::vector<runtime::LossDefinition> losses_;
  std::vector<runtime::DatasetDefinition> datasets_;
  std::vector<runtime::CommHookDefinition> comm_hooks_;
};

}  // namespace braid::plugin

// The two entry points, by these exact names.
extern "C" {
using braid_plugin_info_fn = const braid::plugin::PluginInfo* (*)();
using braid_plugin_register_fn = void (*)(braid::plugin::Registrar*);
}

#ifndef __GXX_ABI_VERSION
#error "braid plugins are built with GCC or Clang (the handshake records __GXX_ABI_VERSION)"
#endif

// Defines both entry points; the block that follows is the registration, with `registrar` in scope.
#define BRAID_PLUGIN(NAME, VERSION)                                                                         \
  static void braid_plugin_register_body(::braid::plugin::Registrar& registrar);                           \
  extern "C" __attribute__((visibility("default"))) const ::braid::plugin::PluginInfo* braid_plugin_info() { \
    static const ::braid::plugin::PluginInfo info{::braid::plugin::kPluginAbi, __GXX_ABI_VERSION,           \
                                                  BRAID_VERSION, NAME, VERSION};                            \
    return &info;                                                                                           \
  }                                                                                                         \
  extern "C" __attribute__((visibility("default"))) void braid_plugin_register(                            \
      ::braid::plugin::Registrar* registrar) {                                                              \
    braid_plugin_register_body(*registrar);                                                                 \
  }                                                                                                         \
  static void braid_plugin_register_body(::braid::plugin::Registrar& registrar)
