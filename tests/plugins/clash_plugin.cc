// A plugin whose registration is refused as a whole: it registers a new loss and a model named like a
// built-in ("mlp"). Neither may be registered afterwards.
#include <stdexcept>

#include "runtime/plugin/plugin.h"

BRAID_PLUGIN("clash", "1.0") {
  registrar.add_loss({"clash_loss", "never registered",
                      [](const braid::Tensor& o, const braid::Tensor&) { return o; }});
  braid::runtime::ModelDefinition d;
  d.name = "mlp";
  d.build = [](const braid::runtime::ModelBuild&) -> std::shared_ptr<braid::nn::Module> { return nullptr; };
  registrar.add_model(std::move(d));
}
