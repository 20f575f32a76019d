// Flat buffers: between what users pass to a collective and what an engine primitive takes, one flat,
// contiguous, dense buffer of a dtype the engine handles. The op bodies (op_bodies.h) use these on the
// lane's thread; engines never see lists, views, bool or (unless they reduce them natively) half types.
#pragma once

#include <vector>

#include "collectives/core/engine.h"
#include "tensor/tensor.h"

namespace braid::collectives::flat {

// The dtype a reduction runs in: bool -> uint8 (with logical ops), float16/bfloat16 -> float32 when the
// engine does not reduce them natively (accumulating in float32 rounds once, so the result does not
// depend on the engine's reduction order); otherwise the dtype itself.
DType reduce_dtype(DType dtype, bool engine_reduces_natively);
// The dtype data moves in without reducing: bool -> uint8, everything else as is.
DType move_dtype(DType dtype);
// ReduceOp -> the engine's op for `dtype` (the user's dtype): AVG and PREMUL_SUM are sums (the op
// bodies scale), bool SUM and BOR are logical or (MAX of 0/1), PRODUCT and BAND logical and (MIN).
EngineOp engine_op(ReduceOp op, DType dtype);

// `t` itself when it is contiguous and already `dtype` (no copy: the engine works in place), else a new
// contiguous copy converted to `dtype`.
Tensor as_buffer(const Tensor& t, DType dtype);
// One flat buffer holding every tensor of `ts` (in order), converted to `dtype`. A single contiguous
// tensor of that dtype is returned as a flat view without copying.
Tensor pack(const TensorList& ts, DType dtype);
// A new flat buffer of `numel` elements, uninitialised.
Tensor flat_buffer(int64_t numel, DType dtype, Device device);
// Copies consecutive pieces of `flat` (starting at element `offset`) back into `ts`, converting to each
// tensor's dtype and layout. Pieces that already alias their tensor are skipped.
void unpack(const Tensor& flat, const TensorList& ts, int64_t offset = 0);
// Copies `src` into `dst` (any layout/dtype) unless they are the same storage view.
void copy_into(const Tensor& dst, const Tensor& src);
// Reduces `ts` (one rank's list) into one new buffer of `dtype` with `op` (elementwise, left to right).
Tensor reduce_local(const TensorList& ts, EngineOp op, DType dtype);

}  // namespace braid::collectives::flat
