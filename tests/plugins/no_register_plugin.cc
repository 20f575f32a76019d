// A plugin with the handshake but without braid_plugin_register: the loader names the missing entry point.
#include "runtime/plugin/plugin.h"

extern "C" __attribute__((visibility("default"))) const braid::plugin::PluginInfo* braid_plugin_info() {
  static const braid::plugin::PluginInfo info{braid::plugin::kPluginAbi, __GXX_ABI_VERSION, BRAID_VERSION, "half_plugin",
                                              "1.0"};
  return &info;
}
