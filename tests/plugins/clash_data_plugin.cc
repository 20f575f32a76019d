// A plugin refused as a whole for a data kind named like a built-in one ("npy"): the valid model it also
// offers must not be registered either.
#include <memory>

#include "nn/linear.h"
#include "runtime/plugin/plugin.h"

BRAID_PLUGIN("clash_data", "1.0") {
  braid::runtime::ModelDefinition d;
  d.name = "clash_data_net";
  d.build = [](const braid::runtime::ModelBuild&) -> std::shared_ptr<braid::nn::Module> {
    return std::make_shared<braid::nn::Linear>(2, 2);
  };
  registrar.add_model(std::move(d));
  registrar.add_dataset({"npy", "a second npy", {},
                         [](const braid::runtime::DatasetBuild&) -> std::unique_ptr<braid::runtime::Dataset> {
                           return nullptr;
                         }});
}
