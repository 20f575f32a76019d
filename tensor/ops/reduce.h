// Reductions over all elements or over a set of dimensions, with keepdim.
//
// `dims` empty means every dimension. sum of bool/integer tensors gives int64 (unless `dtype` is given);
// mean and norm need a floating dtype ("mean(): could not infer output dtype. Input dtype must be either a
// floating point or complex dtype. Got: Long"). 16-bit floats accumulate in float32. max/min/argmax
// of an empty dimension is an error naming the op and the dimension. NaN propagates through max/min.
#pragma once

#include <optional>

#include "tensor/tensor.h"

namespace braid {

Tensor sum(const Tensor& a, const Shape& dims = {}, bool keepdim = false, std::optional<DType> dtype = {});
Tensor mean(const Tensor& a, const Shape& dims = {}, bool keepdim = false);
Tensor prod(const Tensor& a, const Shape& dims = {}, bool keepdim = false);
// p-norm (default 2) over dims; p = inf is the max-abs norm.
Tensor norm(const Tensor& a, double p = 2.0, const Shape& dims = {}, bool keepdim = false);
// Largest/smallest values over dims (no indices).
Tensor amax(const Tensor& a, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& a, const Shape& dims = {}, bool keepdim = false);
// Logical reductions: result bool.
Tensor all(const Tensor& a, const Shape& dims = {}, bool keepdim = false);
Tensor any(const Tensor& a, const Shape& dims = {}, bool keepdim = false);

struct ValuesIndices {
  Tensor values;
  Tensor indices;  // int64; the first occurrence on ties
};
// Max/min over one dimension, with the indices of the extremes.
ValuesIndices max(const Tensor& a, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& a, int64_t dim, bool keepdim = false);
// Max/min of all elements, as a 0-dim tensor.
Tensor max(const Tensor& a);
Tensor min(const Tensor& a);
// Index of the max/min: over the flattened tensor when dim is absent.
Tensor argmax(const Tensor& a, std::optional<int64_t> dim = {}, bool keepdim = false);
Tensor argmin(const Tensor& a, std::optional<int64_t> dim = {}, bool keepdim = false);

}  // namespace braid
