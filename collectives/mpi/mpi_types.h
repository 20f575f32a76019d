// How braid's dtypes and reduce ops map onto MPI's.
//
// Reductions run natively on uint8, int8, int32, int64, float32 and float64. bool, float16 and bfloat16
// are converted by the group before a reducing primitive runs (bool -> uint8 with logical ops, half types
// -> float32), because MPI has no standard half-precision type and Open MPI's reductions on MPI_C_BOOL
// exclude the bitwise ops.
// Ops that only move data (broadcast, gather, scatter, allgather, alltoall) move any dtype as an unsigned
// integer type of the element's size, so counts stay in elements.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "collectives/queue/engine_process_group.h"
#include "tensor/dtype.h"

namespace braid::collectives::mpi {

// Whether MPI reduces this dtype natively.
bool mpi_reduces(DType dtype);
// The MPI type a reduction over `dtype` uses; InternalError when !mpi_reduces(dtype).
MPI_Datatype mpi_reduce_type(DType dtype);
// The MPI type of one element when the data is only moved (any dtype).
MPI_Datatype mpi_move_type(DType dtype);
MPI_Op mpi_op(EngineOp op);

// An element count as MPI's int; InvalidArgument naming `what` when it does not fit.
int mpi_count(int64_t count, const std::string& what);

}  // namespace braid::collectives::mpi
