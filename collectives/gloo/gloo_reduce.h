// Element-wise reduction functions in the form gloo's algorithms take
// (out, in1, in2, count; out may alias in1 or in2), per dtype and EngineOp.
//
// MIN/MAX, and SUM/PRODUCT of floating dtypes, are gloo's own templates (gloo/math.h). Integer SUM and
// PRODUCT are defined here so that they wrap (two's complement, as torch's) without the undefined
// behaviour of signed overflow in gloo's templates, and so are the bitwise ops, which gloo lacks.
// float16/bfloat16 are not reduced here: the group reduces them in float32 (gloo::float16 rounds after
// every addition, so its result would depend on the order of the ring).
#pragma once

#include <cstddef>

#include "collectives/queue/engine_process_group.h"
#include "tensor/dtype.h"

namespace braid::collectives::gloo {

using ReduceFn = void (*)(void* out, const void* in1, const void* in2, size_t count);

// Whether gloo_reduce_function has functions for `dtype`.
bool reduces_natively(DType dtype);
// The function for (dtype, op). Throws InvalidArgument for a dtype this engine does not reduce or a
// bitwise op on a floating dtype.
ReduceFn reduce_function(DType dtype, EngineOp op);

}  // namespace braid::collectives::gloo
