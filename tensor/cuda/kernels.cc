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

launch::KernelTensor kt(const Tensor& t) {
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

}  // namespace

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
