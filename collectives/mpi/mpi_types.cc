#include "collectives/mpi/mpi_types.h"

#include <limits>

#include "base/check.h"

namespace braid::collectives::mpi {

bool mpi_reduces(DType dtype) {
  switch (dtype) {
    case DType::UInt8:
    case DType::Int8:
    case DType::Int32:
    case DType::Int64:
    case DType::Float32:
    case DType::Float64:
    case DType::Complex64:
    case DType::Complex128:
      return true;
    case DType::Bool:
    case DType::Float16:
    case DType::BFloat16:
      return false;
  }
  return false;
}

MPI_Datatype mpi_reduce_type(DType dtype) {
  switch (dtype) {
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Int8: return MPI_INT8_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    // MPI defines SUM and PROD on its C complex types (MPI 3.1, section 5.9.2): exactly the ops complex
    // tensors may reach an engine with.
    case DType::Complex64: return MPI_C_FLOAT_COMPLEX;
    case DType::Complex128: return MPI_C_DOUBLE_COMPLEX;
    case DType::Bool:
    case DType::Float16:
    case DType::BFloat16:
      break;
  }
  BRAID_THROW(InternalError, "mpi: no MPI reduction type for {}; the group should have converted it",
              dtype_name(dtype));
}

MPI_Datatype mpi_move_type(DType dtype) {
  switch (element_size(dtype)) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    case 8: return MPI_UINT64_T;
    case 16: return MPI_C_DOUBLE_COMPLEX;  // complex128, moved as is
    default: break;
  }
  BRAID_THROW(InternalError, "mpi: no MPI type for elements of {} bytes ({})", element_size(dtype),
              dtype_name(dtype));
}

MPI_Op mpi_op(EngineOp op) {
  switch (op) {
    case EngineOp::SUM: return MPI_SUM;
    case EngineOp::PRODUCT: return MPI_PROD;
    case EngineOp::MIN: return MPI_MIN;
    case EngineOp::MAX: return MPI_MAX;
    case EngineOp::BAND: return MPI_BAND;
    case EngineOp::BOR: return MPI_BOR;
    case EngineOp::BXOR: return MPI_BXOR;
  }
  BRAID_THROW(InternalError, "mpi: unknown engine op {}", static_cast<int>(op));
}

int mpi_count(int64_t count, const std::string& what) {
  BRAID_CHECK_ARG(count >= 0 && count <= std::numeric_limits<int>::max(),
                  "{}: {} elements do not fit MPI's int count (at most {} per message)", what, count,
                  std::numeric_limits<int>::max());
  return static_cast<int>(count);
}

}  // namespace braid::collectives::mpi
