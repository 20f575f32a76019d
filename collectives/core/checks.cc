#include "collectives/core/checks.h"

#include <fmt/format.h>

#include "base/check.h"

namespace braid::collectives::checks {

void fail(const Caller& c, const std::string& reason) {
  BRAID_THROW(InvalidArgument, "{}: {} (group '{}', rank {}/{}, {})", c.op, reason, c.group, c.rank, c.size,
              c.backend);
}

void root_rank(const Caller& c, int64_t root) {
  if (root < 0 || root >= c.size) fail(c, fmt::format("invalid root rank: {}", root));
}

void root_tensor(const Caller& c, int64_t root_tensor, size_t num_tensors) {
  if (root_tensor < 0 || root_tensor >= static_cast<int64_t>(num_tensors)) {
    fail(c, fmt::format("invalid root tensor: {} (the root passes {} tensors)", root_tensor, num_tensors));
  }
}

void non_empty(const Caller& c, const TensorList& tensors, const char* what) {
  if (tensors.empty()) fail(c, fmt::format("requires non-empty {}", what));
}

void same_type(const Caller& c, const TensorList& tensors, const Tensor* reference) {
  if (tensors.empty()) return;
  const Tensor& ref = reference ? *reference : tensors[0];
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].dtype() != ref.dtype()) {
      fail(c, fmt::format("invalid tensor type at index {} (expected {}, got {})", i, ref.dtype(), tensors[i].dtype()));
    }
  }
}

void same_type_and_size(const Caller& c, const TensorList& tensors, const Tensor* reference) {
  if (tensors.empty()) return;
  same_type(c, tensors, reference);
  const Tensor& ref = reference ? *reference : tensors[0];
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].shape() != ref.shape()) {
      fail(c, fmt::format("invalid tensor size at index {} (expected {}, got {})", i, shape_str(ref.shape()),
                          shape_str(tensors[i].shape())));
    }
  }
}

void dense(const Caller& c, const TensorList& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].is_sparse()) fail(c, fmt::format("invalid tensor layout at index {} (expected Strided, got Sparse)", i));
  }
}

void all_sparse_or_dense(const Caller& c, const TensorList& tensors) {
  if (tensors.empty()) return;
  const bool sparse = tensors[0].is_sparse();
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].is_sparse() != sparse) {
      fail(c, fmt::format("invalid tensor layout at index {} (expected {}, got {})", i, sparse ? "Sparse" : "Strided",
                          sparse ? "Strided" : "Sparse"));
    }
  }
}

void reduce_op(const Caller& c, ReduceOp op, DType dtype, bool sparse) {
  if (sparse && op.kind != ReduceOp::SUM) {
    fail(c, fmt::format("unsupported reduction operation {} (allreduce of sparse tensors only works with "
                        "ReduceOp.SUM)", op));
  }
  if (op.is_bitwise() && is_floating(dtype)) {
    fail(c, fmt::format("unsupported reduction operation {} for dtype {} (bitwise reductions need integer or bool "
                        "tensors)", op, dtype));
  }
  if ((op.kind == ReduceOp::AVG || op.kind == ReduceOp::PREMUL_SUM) && !is_floating(dtype)) {
    fail(c, fmt::format("unsupported reduction operation {} for dtype {} (needs a floating-point dtype)", op, dtype));
  }
}

void device(const Caller& c, const TensorList& tensors, bool cuda_allowed, bool cpu_allowed) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Device d = tensors[i].device();
    if ((d.is_cuda() && !cuda_allowed) || (d.is_cpu() && !cpu_allowed)) {
      fail(c, fmt::format("unsupported device type {} at index {}", d, i));
    }
  }
}

void allgather_lists(const Caller& c, const std::vector<TensorList>& outputs, const TensorList& inputs) {
  if (inputs.empty()) fail(c, "requires non-empty input tensor list");
  if (outputs.size() != inputs.size()) {
    fail(c, fmt::format("requires input/output tensor lists to have the same length (got {} output lists for {} "
                        "inputs)", outputs.size(), inputs.size()));
  }
  same_type_and_size(c, inputs);
  const size_t expected = static_cast<size_t>(c.size) * inputs.size();
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].size() != expected) {
      fail(c, fmt::format("invalid output tensor list at index {} (expected length {}, got {})", i, expected,
                          outputs[i].size()));
    }
    same_type_and_size(c, outputs[i], &inputs[0]);
  }
}

void gather_lists(const Caller& c, int64_t root, const std::vector<TensorList>& outputs, const TensorList& inputs) {
  root_rank(c, root);
  if (inputs.size() != 1) fail(c, "requires a single-element input tensor list");
  if (c.rank == root) {
    if (outputs.size() != 1) fail(c, "requires a single-element output list containing a list with " +
                                          std::to_string(c.size) + " tensors");
    if (outputs[0].size() != static_cast<size_t>(c.size)) {
      fail(c, fmt::format("Incorrect output list size {}. Output list size should be {}, same as size of the process "
                          "group.", outputs[0].size(), c.size));
    }
    same_type_and_size(c, outputs[0], &inputs[0]);
  } else if (!outputs.empty()) {
    fail(c, "requires empty output on non-root");
  }
}

void scatter_lists(const Caller& c, int64_t root, const TensorList& outputs, const std::vector<TensorList>& inputs) {
  root_rank(c, root);
  if (outputs.size() != 1) fail(c, "requires a single-element output tensor list");
  if (c.rank == root) {
    if (inputs.size() != 1) fail(c, "requires a single-element input list containing a list with " +
                                         std::to_string(c.size) + " tensors");
    if (inputs[0].size() != static_cast<size_t>(c.size)) {
      fail(c, fmt::format("Incorrect input list size {}. Input list size should be {}, same as size of the process "
                          "group.", inputs[0].size(), c.size));
    }
    same_type_and_size(c, inputs[0], &outputs[0]);
  } else if (!inputs.empty()) {
    fail(c, "requires empty input on non-root");
  }
}

void dst_or_src_rank(const Caller& c, int rank, const char* what) {
  if (rank < 0 || rank >= c.size) fail(c, fmt::format("invalid {} rank: {}", what, rank));
}

}  // namespace braid::collectives::checks
