// NpyDataset: rows gathered out of a mapped .npy file, targets read whole (runtime/data/npy_dataset.h).
#include "runtime/data/npy_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "runtime/data/tabular_dataset.h"
#include "tensor/factory.h"
#include "tensor/ops/shape_ops.h"

namespace braid::runtime::data {

namespace {

constexpr int64_t kMaxClasses = 1 << 20;  // a larger id is surely not a class id (as for csv and binary data)
// The kernel's default fault-around: a read fault on a file mapping also maps the cached pages of the
// aligned 64 KiB window around it.
constexpr uint64_t kFaultWindow = 64 * 1024;

// Element i of a little-endian array at `p` (not necessarily aligned).
template <class T>
T load(const uint8_t* p, int64_t i) {
  T v;
  std::memcpy(&v, p + static_cast<size_t>(i) * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void convert_row(const uint8_t* src, float* dst, int64_t n, double scale) {
  for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<float>(static_cast<double>(load<T>(src, j)) * scale);
}

using RowConverter = void (*)(const uint8_t*, float*, int64_t, double);

RowConverter converter_for(DType dtype) {
  switch (dtype) {
    case DType::Float32: return convert_row<float>;
    case DType::Float64: return convert_row<double>;
    case DType::Int32: return convert_row<int32_t>;
    case DType::Int64: return convert_row<int64_t>;
    case DType::UInt8: return convert_row<uint8_t>;
    default: break;
  }
  BRAID_ASSERT(false, "no row conversion from {}", dtype_name(dtype));
}

// The targets, read whole: int64 (N,) class ids or float32 (N, 1) regression values.
Tensor read_targets(const NpyFile& file, int* num_classes) {
  const std::vector<int64_t>& shape = file.shape();
  const bool classes = is_integral(file.dtype(), /*include_bool=*/false);
  const bool shape_ok = shape.size() == 1 || (!classes && shape.size() == 2 && shape[1] == 1);
  BRAID_CHECK_ARG(shape_ok, "{}: targets must be (N,) integer class ids or (N,) / (N, 1) floating values; got shape "
                  "{} of '{}'", file.path(), shape_text(shape), file.descr());
  const int64_t n = shape.empty() ? 0 : shape[0];
  const uint8_t* p = file.data();
  if (classes) {
    std::vector<int64_t> ids(static_cast<size_t>(n));
    int64_t largest = -1;
    for (int64_t i = 0; i < n; ++i) {
      int64_t id = 0;
      switch (file.dtype()) {
        case DType::Int64: id = load<int64_t>(p, i); break;
        case DType::Int32: id = load<int32_t>(p, i); break;
        default: id = load<uint8_t>(p, i); break;
      }
      BRAID_CHECK_ARG(id >= 0, "{}: row {}: class id {} is negative (class ids are 0..C-1)", file.path(), i, id);
      BRAID_CHECK_ARG(id < kMaxClasses, "{}: row {}: class id {} is not below {} (is this file class ids?)",
                      file.path(), i, id, kMaxClasses);
      ids[static_cast<size_t>(i)] = id;
      largest = std::max(largest, id);
    }
    *num_classes = static_cast<int>(largest + 1);
    return from_vector(ids, {n});
  }
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double v = file.dtype() == DType::Float64 ? load<double>(p, i) : load<float>(p, i);
    BRAID_CHECK_ARG(std::isfinite(v), "{}: row {}: the target {} is not a finite number", file.path(), i, v);
    values[static_cast<size_t>(i)] = static_cast<float>(v);
  }
  *num_classes = 0;
  return from_vector(values, {n, 1});
}

}  // namespace

NpyDataset::NpyDataset(const std::string& inputs, const std::string& targets, double feature_scale,
                       size_t resident_budget)
    : inputs_(std::make_unique<NpyFile>(inputs)), scale_(feature_scale), budget_(resident_budget) {
  const std::vector<int64_t>& shape = inputs_->shape();
  BRAID_CHECK_ARG(shape.size() >= 2, "{}: inputs must be (N, F, ...), a row of features per sample; got shape {}",
                  inputs, shape_text(shape));
  rows_ = shape[0];
  BRAID_CHECK_ARG(rows_ >= 1, "{}: no data rows (shape {})", inputs, shape_text(shape));
  features_ = inputs_->numel() / rows_;
  BRAID_CHECK_ARG(features_ >= 1, "{}: the rows have no features (shape {})", inputs, shape_text(shape));
  BRAID_CHECK_ARG(features_ <= INT32_MAX, "{}: {} features per row is too many (shape {})", inputs, features_,
                  shape_text(shape));
  row_bytes_ = static_cast<size_t>(features_) * inputs_->itemsize();

  {
    const NpyFile target_file(targets);  // unmapped again once read
    targets_ = read_targets(target_file, &num_classes_);
  }
  BRAID_CHECK_ARG(targets_.size(0) == rows_,
                  "{} has {} rows but {} has {}: the inputs and the targets need one row per sample", inputs, rows_,
                  targets, targets_.size(0));
}

Batch NpyDataset::gather(const std::vector<int64_t>& indices) const {
  const Tensor index = checked_index_tensor(indices, rows_, inputs_->path());
  const auto b = static_cast<int64_t>(indices.size());
  Tensor x = Tensor::empty({b, features_}, DType::Float32);
  float* out = x.data<float>();
  const RowConverter convert = converter_for(inputs_->dtype());
  // A file within the budget can stay resident whole.
  const bool bounded = inputs_->data_offset() + inputs_->nbytes() > budget_;
  uint64_t previous_window = UINT64_MAX;
  for (int64_t k = 0; k < b; ++k) {
    const size_t offset = static_cast<size_t>(indices[static_cast<size_t>(k)]) * row_bytes_;
    convert(inputs_->data() + offset, out + k * features_, features_, scale_);
    if (!bounded) continue;

    // The residency estimate (see the header): the fault-around windows this row's bytes lie in.
    const uint64_t first = (inputs_->data_offset() + offset) / kFaultWindow;
    const uint64_t last = (inputs_->data_offset() + offset + row_bytes_ - 1) / kFaultWindow;
    const uint64_t windows = last - first + 1 - (first == previous_window ? 1 : 0);
    previous_window = last;
    const uint64_t bytes = windows * kFaultWindow;
    if (bytes > 0 && touched_.fetch_add(bytes, std::memory_order_relaxed) + bytes >= budget_) {
      touched_.store(0, std::memory_order_relaxed);
      inputs_->release_pages();
      releases_.fetch_add(1, std::memory_order_relaxed);
      previous_window = UINT64_MAX;
    }
  }
  Batch batch;
  batch.inputs.push_back(std::move(x));
  batch.target = index_select(targets_, 0, index);
  return batch;
}

std::unique_ptr<Dataset> load_npy_dataset(const std::string& inputs, const std::string& targets,
                                          const DataSpec& spec) {
  return std::make_unique<NpyDataset>(inputs, targets, spec.feature_scale);
}

}  // namespace braid::runtime::data
