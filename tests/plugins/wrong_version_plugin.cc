// A plugin that claims to be built against another braid version: the loader refuses it, naming both.
#include "runtime/plugin/plugin.h"

extern "C" __attribute__((visibility("default"))) const braid::plugin::PluginInfo* braid_plugin_info() {
  static const braid::plugin::PluginInfo info{braid::plugin::kPluginAbi, __GXX_ABI_VERSION, "0.0.9", "old_plugin", "2.0"};
  return &info;
}

extern "C" __attribute__((visibility("default"))) void braid_plugin_register(braid::plugin::Registrar*) {}
