#include "collectives/queue/flat_buffers.h"

#include "base/check.h"
#include "tensor/ops/elementwise.h"

namespace braid::collectives {

namespace flat {

DType reduce_dtype(DType dtype, bool engine_reduces_natively) {
  if (dtype == DType::Bool) return DType::UInt8;
  if ((dtype == DType::Float16 || dtype == DType::BFloat16) && !engine_reduces_natively) return DType::Float32;
  return dtype;
}

DType move_dtype(DType dtype) { return dtype == DType::Bool ? DType::UInt8 : dtype; }

EngineOp engine_op(ReduceOp op, DType dtype) {
  const bool logical = dtype == DType::Bool;
  switch (op.kind) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:
    case ReduceOp::PREMUL_SUM: return logical ? EngineOp::MAX : EngineOp::SUM;
    case ReduceOp::PRODUCT: return logical ? EngineOp::MIN : EngineOp::PRODUCT;
    case ReduceOp::MIN: return EngineOp::MIN;
    case ReduceOp::MAX: return EngineOp::MAX;
    // On 0/1 bytes, and/or are min/max: engines without bitwise reductions (NCCL) can still do them.
    case ReduceOp::BAND: return logical ? EngineOp::MIN : EngineOp::BAND;
    case ReduceOp::BOR: return logical ? EngineOp::MAX : EngineOp::BOR;
    case ReduceOp::BXOR: return EngineOp::BXOR;
  }
  BRAID_THROW(InternalError, "engine_op: unknown reduce op {}", static_cast<int>(op.kind));
}

Tensor as_buffer(const Tensor& t, DType dtype) {
  if (t.is_contiguous() && t.dtype() == dtype) return t;
  Tensor out = Tensor::empty(t.shape(), TensorOptions(dtype, t.device()));
  if (dtype == DType::UInt8 && t.dtype() == DType::Bool) {
    // bool is stored as one byte of 0/1: a byte copy keeps it exact and skips the conversion kernel.
    out.copy_(t.to(DType::UInt8));
  } else {
    out.copy_(t);
  }
  return out;
}

Tensor flat_buffer(int64_t numel, DType dtype, Device device) {
  return Tensor::empty({numel}, TensorOptions(dtype, device));
}

Tensor pack(const TensorList& ts, DType dtype) {
  BRAID_ASSERT(!ts.empty(), "pack: empty tensor list");
  if (ts.size() == 1 && ts[0].is_contiguous() && ts[0].dtype() == dtype) return ts[0].view({ts[0].numel()});
  int64_t total = 0;
  for (const auto& t : ts) total += t.numel();
  Tensor flat = flat_buffer(total, dtype, ts[0].device());
  int64_t offset = 0;
  for (const auto& t : ts) {
    if (t.numel() > 0) flat.narrow(0, offset, t.numel()).view(t.shape()).copy_(t.to(dtype));
    offset += t.numel();
  }
  return flat;
}

void copy_into(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.data_ptr() == src.data_ptr() && dst.dtype() == src.dtype() && dst.is_contiguous() &&
      src.is_contiguous()) {
    return;  // the engine worked in place on this very tensor
  }
  const Tensor shaped = src.numel() == dst.numel() ? src.view(dst.shape()) : src;
  dst.copy_(shaped.dtype() == dst.dtype() ? shaped : shaped.to(dst.dtype()));
}

void unpack(const Tensor& flat, const TensorList& ts, int64_t offset) {
  for (const auto& t : ts) {
    const int64_t n = t.numel();
    if (n > 0) copy_into(t, flat.narrow(0, offset, n));
    offset += n;
  }
}

namespace {
Tensor combine(const Tensor& a, const Tensor& b, EngineOp op) {
  switch (op) {
    case EngineOp::SUM: return braid::add(a, b);
    case EngineOp::PRODUCT: return braid::mul(a, b);
    case EngineOp::MIN: return braid::minimum(a, b);
    case EngineOp::MAX: return braid::maximum(a, b);
    case EngineOp::BAND: return braid::bitwise_and(a, b);
    case EngineOp::BOR: return braid::bitwise_or(a, b);
    case EngineOp::BXOR: return braid::bitwise_xor(a, b);
  }
  BRAID_THROW(InternalError, "reduce_local: unknown engine op {}", static_cast<int>(op));
}
}  // namespace

Tensor reduce_local(const TensorList& ts, EngineOp op, DType dtype) {
  BRAID_ASSERT(!ts.empty(), "reduce_local: empty tensor list");
  Tensor acc = ts[0].to(dtype).contiguous();
  for (size_t i = 1; i < ts.size(); ++i) acc = combine(acc, ts[i].to(dtype), op).to(dtype);
  // combine() may return acc's own storage only for in-place ops; a fresh buffer is needed since the
  // engine writes into it.
  if (ts.size() == 1 || acc.data_ptr() == ts[0].data_ptr()) acc = acc.clone();
  return acc.view({acc.numel()});
}

}  // namespace flat
}  // namespace braid::collectives
