// Data kinds that plugins add (runtime/plugin/plugin.h), named by a job like the built-in ones:
//
//   data: {kind: my_shards, args: {root: /data/shards, classes: 10}, shuffle: true}
//
// A definition makes the Dataset of a split (runtime/data/dataset.h); the sampler keys of the data
// section (shuffle, drop_last, partition) apply to it as to any other, and its args are checked against
// arg_names by `braid check`.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/data/dataset.h"
#include "runtime/job/job_spec.h"

namespace braid::runtime {

// What a definition's make() gets.
struct DatasetBuild {
  const nlohmann::json& args;  // data.args (an object; {} when absent)
  const DataSpec& spec;        // the whole data section: feature_scale, seed, ...
  Split split;
};

struct DatasetDefinition {
  std::string name;
  std::string help;                    // one line
  std::vector<std::string> arg_names;  // any other key in data.args is an error naming the kind
  // The split's data, or nullptr when the kind has no such split (a test split is optional). Called once
  // per trainer and split; errors should name the files they read.
  std::function<std::unique_ptr<Dataset>(const DatasetBuild&)> make;
};

// Adds a kind; `origin` is the plugin's path. InvalidArgument for a taken name or a built-in kind's name.
void register_dataset(DatasetDefinition definition, std::string origin = {});
const DatasetDefinition* find_dataset(const std::string& name);  // nullptr when unknown
bool data_kind_taken(const std::string& name);  // a built-in kind's name, or a registered one
std::string dataset_origin(const std::string& name);
// Every kind a job can name: the built-ins, then the plugins' (marked with their library).
std::string describe_dataset_kinds();
// Checks a DataKind::Registered spec: a known kind and known argument names.
void validate_registered_dataset(const DataSpec& spec);
// The split of a registered kind; errors name the kind and its plugin.
std::unique_ptr<Dataset> make_registered_dataset(const DataSpec& spec, Split split);

}  // namespace braid::runtime
