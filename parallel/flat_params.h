// Parameters moved as one flat buffer: what ZeroRedundancyOptimizer's broadcasts and the model averager's
// allreduces do to a group of parameters of one dtype and device, so that each group costs one collective.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace braid::parallel {

// params[i] for i in `indices` (one dtype), flattened back to back into a new buffer on `where`.
Tensor pack_params(const std::vector<Tensor>& params, const std::vector<size_t>& indices, Device where);
// The inverse: each params[i] takes its piece of `flat`, in the order of `indices`.
void unpack_params(const Tensor& flat, const std::vector<Tensor>& params, const std::vector<size_t>& indices);

}  // namespace braid::parallel
