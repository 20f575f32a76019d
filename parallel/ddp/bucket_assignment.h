// How DDP groups parameters into buckets (PyTorch's _compute_bucket_assignment_by_size,
// as torch's ComputeBucketAssignmentTest checks it).
//
// Walk the tensors in the given order and append each to the open bucket of its (dtype, device); a bucket
// closes when its bytes reach its limit. Each (dtype, device) walks `limits` on its own: its first bucket
// gets limits[0], the next limits[1], and the last limit repeats. Tensors that expect a sparse gradient
// get a bucket each. Buckets come out ordered by their smallest tensor index.
#pragma once

#include <cstddef>
#include <vector>

#include "tensor/tensor.h"

namespace braid::parallel {

struct BucketAssignment {
  std::vector<std::vector<size_t>> buckets;  // tensor indices, in walk order within a bucket
  std::vector<size_t> limits;                // the byte limit each bucket was filled against
};

// `order` (default: 0..n-1) is the walk order; `expect_sparse` (default: none) marks sparse-gradient
// tensors. InvalidArgument for an empty `limits` or a bad order.
BucketAssignment compute_bucket_assignment_by_size(const std::vector<Tensor>& tensors, const std::vector<size_t>& limits,
                                                   const std::vector<bool>& expect_sparse = {},
                                                   const std::vector<size_t>& order = {});

}  // namespace braid::parallel
