// Argument checks of the collectives, run before any communication so that a bad call fails the same
// way on every rank and leaves the group usable. Messages carry torch's substrings ("invalid root
// rank", "invalid tensor type", ...) followed by the op, group and rank:
//   "broadcast: invalid root rank: -1 (group 'world', rank 0/4, gloo)"
#pragma once

#include <string>
#include <vector>

#include "collectives/core/reduce_op.h"
#include "tensor/tensor.h"

namespace braid::collectives::checks {

using TensorList = std::vector<Tensor>;

// Who is calling: the group's name, this rank, the size and the backend.
struct Caller {
  std::string group;
  int rank = 0;
  int size = 1;
  std::string backend;
  std::string op;
};

[[noreturn]] void fail(const Caller& c, const std::string& reason);

void root_rank(const Caller& c, int64_t root);
void root_tensor(const Caller& c, int64_t root_tensor, size_t num_tensors);
// "requires non-empty tensor list" (or `what` instead of "tensor list").
void non_empty(const Caller& c, const TensorList& tensors, const char* what = "tensor list");
// Every tensor has the dtype and shape of tensors[0] (or of `reference` when given):
// "invalid tensor type at index i (expected float32, got float64)", "invalid tensor size at index i ...".
void same_type_and_size(const Caller& c, const TensorList& tensors, const Tensor* reference = nullptr);
void same_type(const Caller& c, const TensorList& tensors, const Tensor* reference = nullptr);
// All dense: "invalid tensor layout at index i (expected Strided, got Sparse)"; or all sparse.
void dense(const Caller& c, const TensorList& tensors);
void all_sparse_or_dense(const Caller& c, const TensorList& tensors);
// The reduction is defined for the dtype: bitwise ops need integral/bool, PRODUCT/MIN/MAX on bool are
// logical; AVG needs floating; sparse tensors need SUM ("unsupported reduction operation").
void reduce_op(const Caller& c, ReduceOp op, DType dtype, bool sparse);
// Every tensor is on a device the backend supports: "unsupported device type cuda:0".
void device(const Caller& c, const TensorList& tensors, bool cuda_allowed, bool cpu_allowed);
// outputs.size() == inputs.size(), each output list has size * inputs.size() entries of the inputs' type and
// size (allgather).
void allgather_lists(const Caller& c, const std::vector<TensorList>& outputs, const TensorList& inputs);
// gather/scatter list shapes on the root and emptiness elsewhere.
void gather_lists(const Caller& c, int64_t root, const std::vector<TensorList>& outputs, const TensorList& inputs);
void scatter_lists(const Caller& c, int64_t root, const TensorList& outputs, const std::vector<TensorList>& inputs);
void dst_or_src_rank(const Caller& c, int rank, const char* what);

}  // namespace braid::collectives::checks
