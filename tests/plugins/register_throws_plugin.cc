// A plugin whose registration throws: the loader names the plugin and the reason, and registers nothing.
#include <stdexcept>

#include "runtime/plugin/plugin.h"

BRAID_PLUGIN("register_throws", "1.0") {
  registrar.add_loss({"never_loss", "never registered",
                      [](const braid::Tensor& o, const braid::Tensor&) { return o; }});
  throw std::runtime_error("the plugin's configuration file is missing");
}
