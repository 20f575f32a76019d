#include "runtime/data/dataset_registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "runtime/models/builtin_models.h"
#include "runtime/models/named_registry.h"

namespace braid::runtime {

namespace {

// The kinds the job parser knows itself; a plugin may not take their names.
const std::vector<std::string>& builtin_kinds() {
  static const std::vector<std::string> kinds = {"synthetic", "csv", "binary", "npy", "hybrid_examples"};
  return kinds;
}

NamedRegistry<DatasetDefinition>& datasets() {
  static NamedRegistry<DatasetDefinition> r("data kind");
  return r;
}

const NamedRegistry<DatasetDefinition>::Entry& known_entry(const std::string& name) {
  const auto* e = datasets().find(name);
  if (e == nullptr) {
    std::vector<std::string> all = builtin_kinds();
    for (const std::string& n : datasets().names()) all.push_back(n);
    const std::string registered = datasets().describe_known();
    BRAID_THROW(InvalidArgument, "data.kind: unknown data kind '{}'{} (known: {}{}{})", name,
                detail::did_you_mean(name, all), fmt::join(builtin_kinds(), ", "), registered.empty() ? "" : ", ",
                registered);
  }
  return *e;
}

}  // namespace

void register_dataset(DatasetDefinition definition, std::string origin) {
  BRAID_CHECK_ARG(definition.make != nullptr, "register_dataset: data kind '{}' has no make function", definition.name);
  for (const std::string& b : builtin_kinds()) {
    BRAID_CHECK_ARG(definition.name != b, "register_dataset: '{}'{} is a built-in data kind", b,
                    origin.empty() ? "" : " (from plugin " + origin + ")");
  }
  const std::string name = definition.name;
  datasets().add(name, std::move(definition), std::move(origin));
}

const DatasetDefinition* find_dataset(const std::string& name) { return datasets().definition(name); }

bool data_kind_taken(const std::string& name) {
  const auto& b = builtin_kinds();
  return std::find(b.begin(), b.end(), name) != b.end() || datasets().find(name) != nullptr;
}

std::string dataset_origin(const std::string& name) { return datasets().origin(name); }

std::string describe_dataset_kinds() {
  const std::string registered = datasets().describe_known();
  return fmt::format("{}{}{}", fmt::join(builtin_kinds(), ", "), registered.empty() ? "" : ", ", registered);
}

void validate_registered_dataset(const DataSpec& spec) {
  const auto& e = known_entry(spec.kind_name);
  detail::check_known_keys(spec.args, e.definition.arg_names, "data.args",
                           fmt::format("argument of data kind '{}'", spec.kind_name));
}

std::unique_ptr<Dataset> make_registered_dataset(const DataSpec& spec, Split split) {
  const auto& e = known_entry(spec.kind_name);
  static const nlohmann::json kEmpty = nlohmann::json::object();
  const DatasetBuild build{spec.args.is_object() ? spec.args : kEmpty, spec, split};
  try {
    return e.definition.make(build);
  } catch (const std::exception& ex) {
    BRAID_THROW(InvalidArgument, "data.kind: data kind '{}'{} failed to make its {} split: {}", spec.kind_name,
                NamedRegistry<DatasetDefinition>::marked(e.origin), split == Split::Train ? "training" : "test",
                ex.what());
  }
}

}  // namespace braid::runtime
