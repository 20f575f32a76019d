// CUDA kernels (compiled by nvcc; see launch.h for the boundary). PLACEHOLDER: being written.
#include "tensor/cuda/launch.h"

namespace braid::cuda::launch {
namespace {
const char* kTodo = "CUDA kernel not implemented yet";
}
const char* copy(const KernelTensor&, const KernelTensor&) { return kTodo; }
const char* fill(const KernelTensor&, KernelScalar) { return kTodo; }
const char* binary(BinaryOp, const KernelTensor&, const KernelTensor&, const KernelTensor&, KernelScalar) { return kTodo; }
const char* unary(UnaryOp, const KernelTensor&, const KernelTensor&) { return kTodo; }
const char* where(const KernelTensor&, const KernelTensor&, const KernelTensor&, const KernelTensor&) { return kTodo; }
const char* reduce_rows(ReduceKind, const KernelTensor&, const KernelTensor&, int64_t, int64_t, double) { return kTodo; }
const char* arg_reduce_rows(bool, const KernelTensor&, const KernelTensor&, int64_t, int64_t) { return kTodo; }
}  // namespace braid::cuda::launch
