// kernels.h for builds without CUDA: a CUDA tensor cannot exist, so reaching here is a usage error.
#include "base/check.h"
#include "tensor/cuda/kernels.h"

namespace braid::cuda {
namespace {
[[noreturn]] void not_built(const char* op) {
  BRAID_THROW(InvalidArgument, "{}: braid was built without CUDA", op);
}
}  // namespace

void copy_strided(const Tensor&, const Tensor&) { not_built("copy_"); }
void fill(const Tensor&, Scalar) { not_built("fill_"); }
void binary(BinaryOp op, const Tensor&, const Tensor&, const Tensor&, Scalar) { not_built(op_name(op).data()); }
void unary(UnaryOp op, const Tensor&, const Tensor&) { not_built(op_name(op).data()); }
void where(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { not_built("where"); }
void reduce_rows(ReduceKind, const Tensor&, const Tensor&, double) { not_built("reduce"); }
void arg_reduce_rows(bool, const Tensor&, const Tensor&) { not_built("argmax/argmin"); }
void gemm(const Tensor&, const Tensor&, const Tensor&) { not_built("mm"); }
void gather(const Tensor&, const Tensor&, int64_t, const Tensor&) { not_built("gather"); }
void index_select(const Tensor&, const Tensor&, int64_t, const Tensor&) { not_built("index_select"); }
void scatter_add(const Tensor&, int64_t, const Tensor&, const Tensor&) { not_built("scatter_add"); }
void embedding_bag(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int) {
  not_built("embedding_bag");
}
void embedding_bag_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            int) {
  not_built("embedding_bag backward");
}

}  // namespace braid::cuda
