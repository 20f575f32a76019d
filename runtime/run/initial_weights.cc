#include "runtime/run/initial_weights.h"

#include <map>

#include "base/check.h"
#include "nn/safetensors.h"
#include "runtime/run/trainer.h"

namespace braid::runtime {

void load_initial_weights(nn::Module& model, const ModelSpec& spec) {
  try {
    const nn::StateDict file = nn::load_safetensors(spec.init_from);
    std::map<std::string, const Tensor*> by_plain;
    for (const auto& [name, t] : file) by_plain.emplace(name, &t);
    // The module's own names (with any "module." levels), carrying the file's tensors.
    nn::StateDict mine;
    std::map<std::string, bool> used;
    for (const auto& [name, t] : model.state_dict()) {
      const auto it = by_plain.find(plain_parameter_name(name));
      if (it == by_plain.end()) continue;  // a missing key: load_state_dict reports it when strict
      used[it->first] = true;
      // The file may hold another dtype (float16 weights for a float32 model): converted, as PyTorch's
      // load_state_dict does through copy_.
      mine.emplace_back(name, it->second->dtype() == t.dtype() ? *it->second : it->second->to(t.dtype()));
    }
    for (const auto& [name, t] : file) {
      if (!used.count(name)) mine.emplace_back(name, t);  // unexpected: reported when strict, else ignored
    }
    model.load_state_dict(mine, spec.strict);
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    // nn's safetensors errors already start with the file's path.
    if (what.rfind(spec.init_from, 0) == 0) BRAID_THROW(InvalidArgument, "model.init_from: {}", what);
    BRAID_THROW(InvalidArgument, "model.init_from: {}: {}", spec.init_from, what);
  }
}

}  // namespace braid::runtime
