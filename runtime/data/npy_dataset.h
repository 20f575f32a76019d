// NumPy datasets (data.kind: npy): an inputs .npy file (N, F, ...) and a targets .npy file (N,) or (N, 1).
//
// Inputs stay in their file, memory-mapped (runtime/data/npy_file.h), and are never read whole: gather()
// copies the chosen rows out of the mapping into a fresh (B, F) float32 batch, F the product of the
// dimensions after the first, converting any supported dtype and multiplying by data.feature_scale
// (computed in double, as the csv kind does, so uint8 pixels give the same features as a CSV of them).
// Targets are N values and are read whole when the dataset opens: an integer dtype gives class ids
// (int64 (B,) targets, num_classes() the largest plus one, each checked non-negative); a floating dtype,
// (N,) or (N, 1), gives regression targets ((B, 1) float32, num_classes() 0).
//
// Resident memory. Every page a gather touches stays mapped into the process and counts in its resident
// set until memory pressure makes the kernel reclaim it, so a pass over a large file would grow the
// trainer's resident set by the whole file. The dataset therefore counts the bytes its gathers bring in
// (an upper estimate: each row's span rounded out to the kernel's 64 KiB fault-around window, a window
// shared with the previous row counted once) and, after `resident_budget` bytes (64 MiB by default),
// drops the mapping's pages with madvise(MADV_DONTNEED). That costs nothing for a read-only file mapping:
// the pages remain in the page cache, and a later touch maps them again without I/O while they are
// cached. The resident set of the mapping thus stays within about the budget plus one batch's rows,
// however large the file. A file no larger than the budget is simply left mapped. The mapping avoids
// 2 MiB pages (MADV_NOHUGEPAGE), which would make the estimate too low.
//
// gather() may be called from several threads at once.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/dataset.h"
#include "runtime/data/npy_file.h"

namespace braid::runtime::data {

class NpyDataset final : public Dataset {
 public:
  static constexpr size_t kDefaultResidentBudget = size_t{64} << 20;

  // InvalidArgument naming the file(s) for a bad file, a shape that is not (N, F, ...) / (N,), no rows,
  // inputs and targets of different lengths, or a negative class id.
  NpyDataset(const std::string& inputs, const std::string& targets, double feature_scale,
             size_t resident_budget = kDefaultResidentBudget);

  int64_t size() const override { return rows_; }
  Batch gather(const std::vector<int64_t>& indices) const override;
  int num_classes() const override { return num_classes_; }
  int num_features() const override { return static_cast<int>(features_); }

  // How many times gathers have released the mapping's pages (for tests and logs).
  int64_t page_releases() const { return releases_.load(std::memory_order_relaxed); }

 private:
  std::unique_ptr<NpyFile> inputs_;
  Tensor targets_;
  int64_t rows_ = 0;
  int64_t features_ = 0;
  size_t row_bytes_ = 0;
  int num_classes_ = 0;
  double scale_;
  size_t budget_;
  mutable std::atomic<uint64_t> touched_{0};
  mutable std::atomic<int64_t> releases_{0};
};

}  // namespace braid::runtime::data
