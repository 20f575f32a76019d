// cuda::gemm through cuBLAS. cuBLAS is column-major and braid row-major: a row-major C [m, n] is the
// column-major C^T, so C = A B is computed as C^T = B^T A^T, each operand read in place when its rows or
// its columns are contiguous (matrix_layout.h), copied to a contiguous tensor otherwise. float32 uses
// plain FP32 arithmetic (no TF32), so results match the CPU's OpenBLAS to rounding; float16 and bfloat16
// accumulate in float32, as the CPU's loop does.
//
// One cuBLAS handle per thread and device, made on first use and destroyed when the thread exits. Like
// every braid kernel the product runs on the legacy default stream and is synchronous with respect to
// the host.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <map>

#include "base/check.h"
#include "tensor/cuda/kernels.h"
#include "tensor/matrix_layout.h"

namespace braid::cuda {
namespace {

const char* status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "an unknown cuBLAS status";
  }
}

void check_cublas(cublasStatus_t s, const char* call, const Tensor& c) {
  if (s != CUBLAS_STATUS_SUCCESS) BRAID_THROW(Error, "mm into {}: {} failed: {}", c.describe(), call, status_name(s));
}

void check_cuda(cudaError_t e, const char* call, const Tensor& c) {
  if (e != cudaSuccess) BRAID_THROW(Error, "mm into {}: {} failed: {}", c.describe(), call, cudaGetErrorString(e));
}

// The calling thread's handles, one per device.
struct Handles {
  std::map<int, cublasHandle_t> by_device;
  ~Handles() {
    for (auto& [device, h] : by_device) (void)cublasDestroy(h);  // errors at process exit are moot
  }
};

cublasHandle_t handle_for(int device, const Tensor& c) {
  thread_local Handles handles;
  auto it = handles.by_device.find(device);
  if (it != handles.by_device.end()) return it->second;
  cublasHandle_t h = nullptr;
  check_cublas(cublasCreate(&h), "cublasCreate", c);
  handles.by_device.emplace(device, h);
  return h;
}

// Sets the current device for the scope.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    (void)cudaGetDevice(&previous_);
    if (previous_ != device && cudaSetDevice(device) == cudaSuccess) switched_ = true;
  }
  ~DeviceScope() {
    if (switched_) (void)cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

cudaDataType_t data_type(DType d, const Tensor& c) {
  switch (d) {
    case DType::Float32: return CUDA_R_32F;
    case DType::Float64: return CUDA_R_64F;
    case DType::Float16: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    default:
      BRAID_THROW(InvalidArgument, "mm: CUDA matrix products support float32, float64, float16 and bfloat16, got {}",
                  c.describe());
  }
}

}  // namespace

void gemm(const Tensor& c, const Tensor& a, const Tensor& b) {
  const cudaDataType_t type = data_type(c.dtype(), c);
  const auto lc = matrix_layout(c);
  if (!lc || lc->transposed || c.shares_storage_with(a) || c.shares_storage_with(b)) {
    const Tensor tmp = Tensor::empty(c.shape(), TensorOptions(c.dtype(), c.device()));
    gemm(tmp, a, b);
    c.copy_(tmp);
    return;
  }
  const BlasOperand oa = blas_operand(a), ob = blas_operand(b);

  const int device = c.device().index;
  DeviceScope scope(device);
  cublasHandle_t h = handle_for(device, c);
  const auto m = static_cast<int>(a.size(0)), k = static_cast<int>(a.size(1)), n = static_cast<int>(b.size(1));
  // Row-major X with contiguous rows is column-major X^T (op N); with contiguous columns it is column-major
  // X, so X^T is op T.
  const cublasOperation_t op_a = oa.layout.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = ob.layout.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const bool f64 = c.dtype() == DType::Float64;
  const double alpha64 = 1.0, beta64 = 0.0;
  const float alpha32 = 1.0f, beta32 = 0.0f;
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&beta64) : &beta32;
  const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  check_cublas(cublasGemmEx(h, op_b, op_a, n, m, k, alpha, ob.tensor.data_ptr(), type, static_cast<int>(ob.layout.ld),
                            oa.tensor.data_ptr(), type, static_cast<int>(oa.layout.ld), beta, c.data_ptr(), type,
                            static_cast<int>(lc->ld), compute, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx", c);
  check_cuda(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize", c);
}

}  // namespace braid::cuda
