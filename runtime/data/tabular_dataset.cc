// TabularDataset and the checks that the dataset kinds share.
#include "runtime/data/tabular_dataset.h"

#include <algorithm>
#include <set>

#include "base/check.h"
#include "tensor/factory.h"
#include "tensor/ops/shape_ops.h"

namespace braid::runtime::data {

TabularDataset::TabularDataset(Tensor features, Tensor targets, int num_classes, std::string origin)
    : features_(std::move(features)),
      targets_(std::move(targets)),
      num_classes_(num_classes),
      origin_(std::move(origin)) {
  // Callers build these tensors themselves; a mismatch here is braid's bug, not the user's.
  BRAID_ASSERT(features_.dim() == 2 && features_.dtype() == DType::Float32, "{}: features are {}", origin_,
               features_.describe());
  const bool classes = num_classes_ > 0;
  BRAID_ASSERT(targets_.dim() == (classes ? 1 : 2) && targets_.size(0) == features_.size(0) &&
                   targets_.dtype() == (classes ? DType::Int64 : DType::Float32),
               "{}: targets are {} for features {} and {} classes", origin_, targets_.describe(),
               features_.describe(), num_classes_);
}

Batch TabularDataset::gather(const std::vector<int64_t>& indices) const {
  const Tensor index = checked_index_tensor(indices, size(), origin_);
  Batch batch;
  batch.inputs.push_back(index_select(features_, 0, index));
  batch.target = index_select(targets_, 0, index);
  return batch;
}

Tensor checked_index_tensor(const std::vector<int64_t>& indices, int64_t size, const std::string& origin) {
  for (size_t i = 0; i < indices.size(); ++i) {
    BRAID_CHECK_ARG(0 <= indices[i] && indices[i] < size,
                    "{}: sample index {} (position {} of the batch) is out of range for {} samples", origin,
                    indices[i], i, size);
  }
  return from_vector(indices, {static_cast<int64_t>(indices.size())});
}

std::vector<int64_t> resolve_feature_columns(const std::vector<int>& wanted, int64_t width, int64_t label,
                                             const std::string& origin) {
  std::vector<int64_t> columns;
  if (wanted.empty()) {
    for (int64_t c = 0; c < width; ++c) {
      if (c != label) columns.push_back(c);
    }
    BRAID_CHECK_ARG(!columns.empty(), "{}: no feature columns: the data has only the label column", origin);
    return columns;
  }
  std::set<int64_t> seen;
  for (const int w : wanted) {
    const int64_t c = w < 0 ? w + width : w;
    BRAID_CHECK_ARG(0 <= c && c < width, "{}: data.feature_columns: column {} is out of range for {} columns",
                    origin, w, width);
    BRAID_CHECK_ARG(c != label, "{}: data.feature_columns: column {} is the label column", origin, w);
    BRAID_CHECK_ARG(seen.insert(c).second, "{}: data.feature_columns: column {} is listed twice", origin, w);
    columns.push_back(c);
  }
  return columns;
}

int num_classes_of(const Tensor& labels, const std::string& origin) {
  const std::vector<int64_t> values = to_vector<int64_t>(labels);
  BRAID_CHECK_ARG(!values.empty(), "{}: no data rows", origin);
  return static_cast<int>(*std::max_element(values.begin(), values.end()) + 1);
}

}  // namespace braid::runtime::data
