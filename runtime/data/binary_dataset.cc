// Binary dataset files: a state-dict file with "features" and "labels" (runtime/data/binary_dataset.h).
#include "runtime/data/binary_dataset.h"

#include <algorithm>

#include "base/check.h"
#include "nn/serialize.h"
#include "runtime/data/tabular_dataset.h"
#include "tensor/factory.h"
#include "tensor/ops/shape_ops.h"

namespace braid::runtime {

namespace {

constexpr int64_t kMaxClasses = 1 << 20;

// The checks shared by the writer and the loader, so that a file the writer accepts always loads.
// Returns whether the labels are class ids (else regression targets).
bool check_tensors(const std::string& path, const Tensor& features, const Tensor& labels) {
  BRAID_CHECK_ARG(features.defined() && labels.defined(), "{}: a binary dataset needs both 'features' and 'labels'",
                  path);
  BRAID_CHECK_ARG(features.dim() == 2 && is_floating(features.dtype()),
                  "{}: 'features' must be a floating (N, F) matrix, got {}", path, features.describe());
  const bool classes = is_integral(labels.dtype(), /*include_bool=*/false);
  const bool targets = is_floating(labels.dtype());
  BRAID_CHECK_ARG(classes || targets, "{}: 'labels' must be integer class ids or floating targets, got {}", path,
                  labels.describe());
  const bool shape_ok = labels.dim() == 1 || (targets && labels.dim() == 2 && labels.size(1) == 1);
  BRAID_CHECK_ARG(shape_ok, "{}: 'labels' must be (N,){}, got {}", path, targets ? " or (N, 1)" : "",
                  labels.describe());
  BRAID_CHECK_ARG(labels.size(0) == features.size(0), "{}: 'features' has {} rows but 'labels' has {}", path,
                  features.size(0), labels.size(0));
  BRAID_CHECK_ARG(features.size(0) >= 1, "{}: no data rows", path);
  if (classes) {
    const std::vector<int64_t> ids = to_vector<int64_t>(labels);
    const auto [lo, hi] = std::minmax_element(ids.begin(), ids.end());
    BRAID_CHECK_ARG(*lo >= 0 && *hi < kMaxClasses, "{}: class id {} in 'labels' is not in [0, {})", path,
                    *lo < 0 ? *lo : *hi, kMaxClasses);
  }
  return classes;
}

}  // namespace

void save_binary_dataset(const std::string& path, const Tensor& features, const Tensor& labels) {
  check_tensors(path, features, labels);
  nn::save_state_dict({{"features", features}, {"labels", labels}}, path);
}

namespace data {

std::unique_ptr<Dataset> load_binary_dataset(const std::string& path, const DataSpec& spec) {
  const nn::StateDict entries = nn::load_state_dict_file(path);
  Tensor features;
  Tensor labels;
  for (const auto& [name, tensor] : entries) {
    if (name == "features") {
      features = tensor;
    } else if (name == "labels") {
      labels = tensor;
    } else {
      BRAID_THROW(InvalidArgument, "{}: unexpected tensor '{}' in a binary dataset (it holds 'features' and "
                  "'labels' only)", path, name);
    }
  }
  const bool classes = check_tensors(path, features, labels);

  const std::vector<int64_t> columns = resolve_feature_columns(spec.feature_columns, features.size(1), -1, path);
  Tensor x = features.to(DType::Float32);
  if (!spec.feature_columns.empty()) {
    x = index_select(x, 1, from_vector(columns, {static_cast<int64_t>(columns.size())}));
  }
  x = x.contiguous();
  if (spec.feature_scale != 1.0) x = x.clone().mul_(spec.feature_scale);  // never scale a shared tensor
  if (classes) {
    Tensor y = labels.to(DType::Int64).contiguous();
    const int num_classes = num_classes_of(y, path);
    return std::make_unique<TabularDataset>(std::move(x), std::move(y), num_classes, path);
  }
  Tensor y = labels.to(DType::Float32).reshape({labels.size(0), 1}).contiguous();
  return std::make_unique<TabularDataset>(std::move(x), std::move(y), 0, path);
}

}  // namespace data

}  // namespace braid::runtime
