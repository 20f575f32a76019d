// How braid's dtypes and engine reduce ops map onto NCCL's, and how NCCL failures read.
#pragma once

#include <nccl.h>

#include <string>
#include <string_view>

#include "collectives/queue/engine_process_group.h"
#include "tensor/dtype.h"

namespace braid::collectives::nccl {

// int8/uint8/int32/int64/float16/bfloat16/float32/float64 map one to one; bool moves as uint8 (the group
// already turns bool into uint8 before any primitive, this is only a safety net).
ncclDataType_t to_nccl(DType dtype);

// SUM/PRODUCT/MIN/MAX map to ncclSum/ncclProd/ncclMin/ncclMax. NCCL has no bitwise reductions: BAND,
// BOR and BXOR throw InvalidArgument naming `what` (NcclEngine::check_reduce already rejects them at call time).
ncclRedOp_t to_nccl(EngineOp op, std::string_view what);


// "ncclUnhandledCudaError (unhandled cuda error ...): <ncclGetLastError text>" for messages.
std::string describe_nccl_error(ncclResult_t result, ncclComm_t comm);

}  // namespace braid::collectives::nccl
