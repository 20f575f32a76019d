// Internal to runtime/data: the in-memory table that the synthetic, CSV and binary datasets all become,
// the helpers they share (npy data uses them too), and the constructor of each kind (make_dataset.cc picks
// one).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/dataset.h"

namespace braid::runtime::data {

// Rows of features with one target each. gather() copies the chosen rows into fresh tensors, so a batch
// never aliases the dataset (a trainer may modify its batch in place).
class TabularDataset final : public Dataset {
 public:
  // features: (N, F) float32. targets: (N,) int64 class ids in [0, num_classes), or (N, 1) float32 when
  // num_classes is 0 (regression). `origin` names the data in errors (a path, "synthetic data").
  TabularDataset(Tensor features, Tensor targets, int num_classes, std::string origin);

  int64_t size() const override { return features_.size(0); }
  Batch gather(const std::vector<int64_t>& indices) const override;
  int num_classes() const override { return num_classes_; }
  int num_features() const override { return static_cast<int>(features_.size(1)); }

 private:
  Tensor features_;
  Tensor targets_;
  int num_classes_;
  std::string origin_;
};

// `indices` as an int64 tensor, after checking each against [0, size); the error names `origin`.
Tensor checked_index_tensor(const std::vector<int64_t>& indices, int64_t size, const std::string& origin);

// The feature columns a spec selects out of `width` columns: `wanted` (negative counts from the end), or
// every column but `label` (-1: none) when `wanted` is empty. InvalidArgument, naming `origin`, for a
// column out of range, a repeated one, or the label column among the features.
std::vector<int64_t> resolve_feature_columns(const std::vector<int>& wanted, int64_t width, int64_t label,
                                             const std::string& origin);

// The largest class id plus one, after checking that there is at least one row (labels: int64, 1-D).
int num_classes_of(const Tensor& labels, const std::string& origin);

std::unique_ptr<Dataset> make_synthetic_dataset(const DataSpec& spec, Split split);
std::unique_ptr<Dataset> load_csv_dataset(const std::string& path, const DataSpec& spec);
std::unique_ptr<Dataset> load_binary_dataset(const std::string& path, const DataSpec& spec);
// data.kind npy: runtime/data/npy_dataset.h.
std::unique_ptr<Dataset> load_npy_dataset(const std::string& inputs, const std::string& targets,
                                          const DataSpec& spec);
std::unique_ptr<Dataset> make_hybrid_examples_dataset();

}  // namespace braid::runtime::data
