// Joining, splitting and indexing: cat, stack, split, chunk, index_select, gather, scatter_add.
// Index tensors are int64 (int32 accepted). Out-of-range indices throw naming the op, the index value and
// the dimension size; nothing is written.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace braid {

// Tensors must agree except in `dim`; dtypes promote. 1-D empty tensors (shape [0]) are skipped, as in
// PyTorch.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Tensors must have equal shapes; a new dimension is inserted at `dim`.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Views of `split_size` along dim (the last one may be smaller).
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim = 0);
// Views with the given sizes, which must sum to the dimension's size.
std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim = 0);
// At most `chunks` views of equal size (ceil), as torch.chunk.
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim = 0);
// Rows (along dim) picked by a 1-D index tensor.
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
// out[i][j] = a[index[i][j]][j] (dim 0), as torch.gather; index has a's number of dims.
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
// self[index[i][j]][j] += src[i][j] (dim 0), in place; returns self.
const Tensor& scatter_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

}  // namespace braid
