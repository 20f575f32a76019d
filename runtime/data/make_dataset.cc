// make_dataset: the dataset a DataSpec describes, for a split.
#include <cmath>

#include "base/check.h"
#include "runtime/data/dataset_registry.h"
#include "runtime/data/tabular_dataset.h"

namespace braid::runtime {

namespace {

// A file-backed split: the training file, or the optional test file.
std::unique_ptr<Dataset> load_file(const DataSpec& spec, Split split) {
  const std::string& path = split == Split::Train ? spec.path : spec.test_path;
  if (path.empty()) {
    // (to_string(DataKind) lives with the job-file parser, which this file does not need to link.)
    BRAID_CHECK_ARG(split == Split::Test, "data.path is empty: data.kind {} needs a training file",
                    spec.kind == DataKind::Csv ? "csv" : "binary");
    return nullptr;  // no held-out data
  }
  return spec.kind == DataKind::Csv ? data::load_csv_dataset(path, spec) : data::load_binary_dataset(path, spec);
}

// An npy split: the inputs and targets files, both required for training, both or neither for testing.
std::unique_ptr<Dataset> load_npy(const DataSpec& spec, Split split) {
  const bool train = split == Split::Train;
  const std::string& inputs = train ? spec.inputs : spec.test_inputs;
  const std::string& targets = train ? spec.targets : spec.test_targets;
  if (!train && inputs.empty() && targets.empty()) return nullptr;  // no held-out data
  BRAID_CHECK_ARG(!inputs.empty() && !targets.empty(), "data.kind npy: data.{}inputs and data.{}targets are "
                  "both required (got '{}' and '{}')", train ? "" : "test_", train ? "" : "test_", inputs, targets);
  return data::load_npy_dataset(inputs, targets, spec);
}

}  // namespace

std::unique_ptr<Dataset> make_dataset(const DataSpec& spec, Split split) {
  BRAID_CHECK_ARG(std::isfinite(spec.feature_scale) && spec.feature_scale != 0,
                  "data.feature_scale is {}, must be a finite non-zero number", spec.feature_scale);
  switch (spec.kind) {
    case DataKind::Synthetic:
      return data::make_synthetic_dataset(spec, split);
    case DataKind::Csv:
    case DataKind::Binary:
      return load_file(spec, split);
    case DataKind::Npy:
      return load_npy(spec, split);
    case DataKind::HybridExamples:
      return split == Split::Train ? data::make_hybrid_examples_dataset() : nullptr;
    case DataKind::Registered:
      return make_registered_dataset(spec, split);
  }
  BRAID_THROW(InvalidArgument, "make_dataset: unknown data.kind {}", static_cast<int>(spec.kind));
}

}  // namespace braid::runtime
