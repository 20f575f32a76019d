// kernels.h over the nvcc-compiled launchers in kernels.cu: converts Tensors to plain KernelTensors and
// turns launcher errors into exceptions that name the op and operands.
#include "tensor/cuda/kernels.h"

#include "base/check.h"
#include "tensor/cuda/device_api.h"
#include "tensor/cuda/launch.h"

namespace braid::cuda {
namespace {

// launch.h repeats the DType values for nvcc code, which cannot include dtype.h.
static_assert(launch::dtype_code::kBool == static_cast<int>(DType::Bool));
static_assert(launch::dtype_code::kUInt8 == static_cast<int>(DType::UInt8));
static_assert(launch::dtype_code::kInt8 == static_cast<int>(DType::Int8));
static_assert(launch::dtype_code::kInt32 == static_cast<int>(DType::Int32));
static_assert(launch::dtype_code::kInt64 == static_cast<int>(DType::Int64));
static_assert(launch::dtype_code::kFloat16 == static_cast<int>(DType::Float16));
static_assert(launch::dtype_code::kBFloat16 == static_cast<int>(DType::BFloat16));
static_assert(launch::dtype_code::kFloat32 == static_cast<int>(DType::Float32));
static_assert(launch::dtype_code::kFloat64 == static_cast<int>(DType::Float64));

// The kernels know the real dtypes only; complex tensors move between devices as bytes (Tensor::to) and
// are computed on the CPU.
void check_real(const Tensor& t) {
  BRAID_CHECK_ARG(!is_complex(t.dtype()),
                  "CUDA kernels do not support complex tensors (got {}); compute on the CPU, or on "
                  "view_as_real(t) where the op is elementwise over the parts",
                  t.describe());
}

launch::KernelTensor kt(const Tensor& t) {
  check_real(t);
  BRAID_CHECK_ARG(t.dim() <= launch::kMaxDims, "CUDA kernels support at most {} dims, got tensor {}",
                  launch::kMaxDims, t.describe());
  launch::KernelTensor k;
  k.data = t.data_ptr();
  k.dtype = static_cast<int>(t.dtype());
  k.ndim = static_cast<int>(t.dim());
  for (int i = 0; i < k.ndim; ++i) {
    k.sizes[i] = t.shape()[i];
    k.strides[i] = t.strides()[i];
  }
  return k;
}

launch::KernelScalar ks(Scalar s) { return {s.to_double(), s.to_int()}; }

void check(const char* err, std::string_view op, const Tensor& out) {
  if (err != nullptr) BRAID_THROW(Error, "{} on {}: CUDA kernel failed: {}", op, out.describe(), err);
}

// `t` viewed over `sizes` with its own strides for its first dims (0 beyond them), and 0 along `zero_dim`
// (-1: none): the operands of the index launchers.
launch::KernelTensor kt_over(const Tensor& t, const Shape& sizes, int64_t zero_dim) {
  check_real(t);
  BRAID_CHECK_ARG(static_cast<int>(sizes.size()) <= launch::kMaxDims, "CUDA kernels support at most {} dims, got {}",
                  launch::kMaxDims, t.describe());
  launch::KernelTensor k;
  k.data = t.data_ptr();
  k.dtype = static_cast<int>(t.dtype());
  k.ndim = static_cast<int>(sizes.size());
  for (int i = 0; i < k.ndim; ++i) {
    k.sizes[i] = sizes[static_cast<size_t>(i)];
    k.strides[i] = i < t.dim() && i != zero_dim ? t.strides()[static_cast<size_t>(i)] : 0;
  }
  return k;
}

int64_t stride_at(const Tensor& t, int64_t dim) { return t.dim() == 0 ? 0 : t.stride(dim); }

launch::EmbeddingBagArgs bag_args(const Tensor& weight, const Tensor& input, const Tensor& offsets,
                                  const Tensor& per_sample_weights, int mode) {
  BRAID_ASSERT(weight.dim() == 2 && weight.is_contiguous() && input.is_contiguous() && offsets.is_contiguous() &&
                   input.dtype() == DType::Int64 && offsets.dtype() == DType::Int64,
               "embedding_bag: weight [V, D] contiguous, int64 input and offsets expected");
  launch::EmbeddingBagArgs a;
  a.weight = weight.data_ptr();
  a.dtype = static_cast<int>(weight.dtype());
  a.dim = weight.size(1);
  a.input = static_cast<const int64_t*>(input.data_ptr());
  a.offsets = static_cast<const int64_t*>(offsets.data_ptr());
  a.nbags = offsets.numel();
  a.n = input.numel();
  a.per_sample_weights = per_sample_weights.defined() ? per_sample_weights.data_ptr() : nullptr;
  a.mode = mode;
  return a;
}

}  // namespace

void gather(const Tensor& out, const Tensor& a, int64_t dim, const Tensor& index) {
  const Shape& over = index.shape();
  check(launch::gather(kt_over(out, over, -1), kt_over(index, over, -1), kt_over(a, over, dim), stride_at(a, dim)),
        "gather", out);
}

void index_select(const Tensor& out, const Tensor& a, int64_t dim, const Tensor& index) {
  // The index runs along `dim` of the output: viewed over out's shape, its stride is 0 elsewhere.
  const Shape& over = out.shape();
  launch::KernelTensor idx = kt_over(index, over, -1);
  for (int i = 0; i < idx.ndim; ++i) idx.strides[i] = i == dim ? (index.dim() == 0 ? 0 : index.stride(0)) : 0;
  check(launch::gather(kt_over(out, over, -1), idx, kt_over(a, over, dim), stride_at(a, dim)), "index_select", out);
}

void scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  const Shape& over = index.shape();
  check(launch::scatter_add(kt_over(self, over, dim), kt_over(index, over, -1), kt_over(src, over, -1),
                            stride_at(self, dim)),
        "scatter_add", self);
}

void embedding_bag(const Tensor& out, const Tensor& argmax, const Tensor& weight, const Tensor& input,
                   const Tensor& offsets, const Tensor& per_sample_weights, int mode) {
  check(launch::embedding_bag(bag_args(weight, input, offsets, per_sample_weights, mode), out.data_ptr(),
                              argmax.defined() ? static_cast<int64_t*>(argmax.data_ptr()) : nullptr),
        "embedding_bag", out);
}

void embedding_bag_backward(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& argmax,
                            const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights, int mode) {
  BRAID_ASSERT(grad_out.is_contiguous() && grad_weight.is_contiguous(), "embedding_bag backward: contiguous grads");
  check(launch::embedding_bag_backward(bag_args(grad_weight, input, offsets, per_sample_weights, mode),
                                       grad_out.data_ptr(),
                                       argmax.defined() ? static_cast<const int64_t*>(argmax.data_ptr()) : nullptr,
                                       grad_weight.data_ptr()),
        "embedding_bag backward", grad_weight);
}

void copy_strided(const Tensor& dst, const Tensor& src) { check(launch::copy(kt(dst), kt(src)), "copy_", dst); }

void fill(const Tensor& dst, Scalar value) { check(launch::fill(kt(dst), ks(value)), "fill_", dst); }

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha) {
  check(launch::binary(op, kt(out), kt(a), kt(b), ks(alpha)), op_name(op), out);
}

void unary(UnaryOp op, const Tensor& out, const Tensor& a) {
  check(launch::unary(op, kt(out), kt(a)), op_name(op), out);
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  check(launch::where(kt(out), kt(cond), kt(a), kt(b)), "where", out);
}

void reduce_rows(ReduceKind kind, const Tensor& out, const Tensor& in, double p) {
  BRAID_ASSERT(in.dim() == 2 && in.is_contiguous() && out.is_contiguous(), "reduce_rows expects [rows, n]");
  check(launch::reduce_rows(kind, kt(out), kt(in), in.size(0), in.size(1), p), "reduce", out);
}

void arg_reduce_rows(bool is_max, const Tensor& out, const Tensor& in) {
  BRAID_ASSERT(in.dim() == 2 && in.is_contiguous() && out.is_contiguous(), "arg_reduce_rows expects [rows, n]");
  check(launch::arg_reduce_rows(is_max, kt(out), kt(in), in.size(0), in.size(1)), is_max ? "argmax" : "argmin",
        out);
}

}  // namespace braid::cuda
