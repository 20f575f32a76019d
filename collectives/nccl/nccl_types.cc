#include "collectives/nccl/nccl_types.h"

#include <fmt/format.h>

#include "base/check.h"

namespace braid::collectives::nccl {

ncclDataType_t to_nccl(DType dtype) {
  switch (dtype) {
    case DType::Bool:
    case DType::UInt8: return ncclUint8;
    case DType::Int8: return ncclInt8;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Complex64:
    case DType::Complex128:
      // ProcessGroup hands NCCL complex tensors as their real parts except for PRODUCT, which NCCL
      // cannot compute on pairs of reals.
      BRAID_THROW(InvalidArgument,
                  "nccl: PRODUCT of {} tensors is not supported (NCCL has no complex type); reduce them with "
                  "SUM or AVG, or over the gloo or mpi backend",
                  dtype_name(dtype));
  }
  BRAID_THROW(InternalError, "nccl: unknown dtype {}", static_cast<int>(dtype));
}

ncclRedOp_t to_nccl(EngineOp op, std::string_view what) {
  switch (op) {
    case EngineOp::SUM: return ncclSum;
    case EngineOp::PRODUCT: return ncclProd;
    case EngineOp::MIN: return ncclMin;
    case EngineOp::MAX: return ncclMax;
    case EngineOp::BAND:
    case EngineOp::BOR:
    case EngineOp::BXOR: break;
  }
  BRAID_THROW(InvalidArgument, "{}: unsupported reduction operation {} (NCCL has no bitwise reductions; use the "
              "gloo or mpi backend for BAND/BOR/BXOR)", what, engine_op_name(op));
}

namespace {

std::string_view result_name(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclResult";
  }
}

}  // namespace

std::string describe_nccl_error(ncclResult_t result, ncclComm_t comm) {
  std::string text = fmt::format("{} {} ({})", result_name(result), static_cast<int>(result),
                                 ncclGetErrorString(result));
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') text += fmt::format(": {}", last);
  return text;
}

}  // namespace braid::collectives::nccl
