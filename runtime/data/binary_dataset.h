// Binary dataset files (data.kind: binary): large numeric data that loads without parsing text.
//
// A binary dataset is a state-dict file (nn/serialize.h: magic "BRSD", version, entries in the checked
// "BRTN" tensor format, CRC-32 of the whole file; written atomically) holding exactly two tensors:
//   "features"  (N, F), any floating dtype; loaded as float32 and multiplied by data.feature_scale.
//   "labels"    (N,) of an integer dtype: class ids 0..C-1 (num_classes() = the largest plus one); or
//               (N,) / (N, 1) of a floating dtype: regression targets (num_classes() = 0, targets (B, 1)).
// data.feature_columns selects columns of "features" (negative counts from the end; empty: all of them);
// data.label_column and data.header do not apply. A file that is truncated, corrupted (checksum), of
// another version, or holds other tensors or shapes is rejected with an InvalidArgument naming the path.
//
// Reusing the state-dict format gives the data the same integrity checks and atomic writes as
// checkpoints, and lets Python write it with a few lines of struct packing (the format is documented
// there, field by field).
#pragma once

#include <string>

#include "tensor/tensor.h"

namespace braid::runtime {

// Writes `features` and `labels` (as described above) to `path`, atomically. InvalidArgument, naming
// `path`, for tensors the loader would reject; braid::Error when writing fails.
void save_binary_dataset(const std::string& path, const Tensor& features, const Tensor& labels);

}  // namespace braid::runtime
