#include "collectives/queue/engine_router.h"

#include "base/logging.h"

namespace braid::collectives {

EngineRouter::EngineRouter(Engine& network, Engine* local, EnginePolicy policy, Engine* hier)
    : network_(network), local_(local), policy_(policy), hier_(hier), log_(logging::get("braid.collectives")) {}

bool EngineRouter::hier_first(const OpTraits& op, const OpContext& ctx) const {
  if (hier_ == nullptr) return false;
  if (!log_->should_log(spdlog::level::debug)) return policy_.hier_first(op, hier_);
  std::string why;
  const bool yes = policy_.hier_first(op, hier_, &why);
  log_->debug("{}: {} ({} B {} {}: {})", ctx.what, yes ? hier_->name() : "not in two levels", op.bytes, op.dtype,
              engine_op_name(op.op), why);
  return yes;
}

bool EngineRouter::local_first(const OpTraits& op, const OpContext& ctx) const {
  if (local_ == nullptr) return false;
  if (!log_->should_log(spdlog::level::debug)) return policy_.local_first(op, local_);
  std::string why;
  const bool local = policy_.local_first(op, local_, &why);
  log_->debug("{}: {} ({} B {} {}: {})", ctx.what, local ? local_->name() : network_.name(), op.bytes, op.dtype,
              engine_op_name(op.op), why);
  return local;
}

void EngineRouter::declined(const OpContext& ctx, const Engine* engine) const {
  if (!log_->should_log(spdlog::level::debug)) return;
  if (engine == local_) {
    log_->debug("{}: {} declined it, {} runs it", ctx.what, engine->name(), network_.name());
  } else {
    log_->debug("{}: {} declined it", ctx.what, engine->name());
  }
}

void EngineRouter::broadcast(Tensor& buffer, int root, const OpContext& ctx) {
  const OpTraits op{OpKind::Broadcast, static_cast<int64_t>(buffer.nbytes()), buffer.dtype(), EngineOp::SUM,
                    buffer.device()};
  if (hier_first(op, ctx)) {
    if (hier_->broadcast(buffer, root, ctx)) return;
    declined(ctx, hier_);
  }
  if (local_first(op, ctx)) {
    if (local_->broadcast(buffer, root, ctx)) return;
    declined(ctx, local_);
  }
  (void)network_.broadcast(buffer, root, ctx);
}

void EngineRouter::allreduce(Tensor& buffer, EngineOp eop, const OpContext& ctx) {
  const OpTraits op{OpKind::Allreduce, static_cast<int64_t>(buffer.nbytes()), buffer.dtype(), eop, buffer.device()};
  if (hier_first(op, ctx)) {
    if (hier_->allreduce(buffer, eop, ctx)) return;
    declined(ctx, hier_);
  }
  if (local_first(op, ctx)) {
    if (local_->allreduce(buffer, eop, ctx)) return;
    declined(ctx, local_);
  }
  (void)network_.allreduce(buffer, eop, ctx);
}

void EngineRouter::allreduce_coalesced(Tensor& flat, EngineOp eop, const OpContext& ctx) {
  const OpTraits op{OpKind::AllreduceCoalesced, static_cast<int64_t>(flat.nbytes()), flat.dtype(), eop, flat.device()};
  (void)local_first(op, ctx);  // never local: logged only
  (void)network_.allreduce(flat, eop, ctx);
}

void EngineRouter::reduce(Tensor& buffer, EngineOp eop, int root, const OpContext& ctx) {
  const OpTraits op{OpKind::Reduce, static_cast<int64_t>(buffer.nbytes()), buffer.dtype(), eop, buffer.device()};
  (void)local_first(op, ctx);
  (void)network_.reduce(buffer, eop, root, ctx);
}

void EngineRouter::allgather(const Tensor& input, Tensor& output, const OpContext& ctx) {
  const OpTraits op{OpKind::Allgather, static_cast<int64_t>(output.nbytes()), output.dtype(), EngineOp::SUM,
                    output.device()};
  if (hier_first(op, ctx)) {
    if (hier_->allgather(input, output, ctx)) return;
    declined(ctx, hier_);
  }
  if (local_first(op, ctx)) {
    if (local_->allgather(input, output, ctx)) return;
    declined(ctx, local_);
  }
  (void)network_.allgather(input, output, ctx);
}

void EngineRouter::gather(const Tensor& input, Tensor& output, int root, const OpContext& ctx) {
  const OpTraits op{OpKind::Gather, static_cast<int64_t>(input.nbytes()), input.dtype(), EngineOp::SUM,
                    input.device()};
  (void)local_first(op, ctx);
  (void)network_.gather(input, output, root, ctx);
}

void EngineRouter::scatter(const Tensor& input, Tensor& output, int root, const OpContext& ctx) {
  const OpTraits op{OpKind::Scatter, static_cast<int64_t>(output.nbytes()), output.dtype(), EngineOp::SUM,
                    output.device()};
  (void)local_first(op, ctx);
  (void)network_.scatter(input, output, root, ctx);
}

void EngineRouter::reduce_scatter(const Tensor& input, Tensor& output, EngineOp eop, const OpContext& ctx) {
  const OpTraits op{OpKind::ReduceScatter, static_cast<int64_t>(input.nbytes()), output.dtype(), eop,
                    output.device()};
  if (hier_first(op, ctx)) {
    if (hier_->reduce_scatter(input, output, eop, ctx)) return;
    declined(ctx, hier_);
  }
  if (local_first(op, ctx)) {
    if (local_->reduce_scatter(input, output, eop, ctx)) return;
    declined(ctx, local_);
  }
  (void)network_.reduce_scatter(input, output, eop, ctx);
}

void EngineRouter::alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                            const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& recv_counts,
                            const std::vector<int64_t>& recv_offsets, const OpContext& ctx) {
  const OpTraits op{OpKind::Alltoall, static_cast<int64_t>(input.nbytes()), input.dtype(), EngineOp::SUM,
                    input.device()};
  if (local_first(op, ctx)) {
    if (local_->alltoall(input, output, send_counts, send_offsets, recv_counts, recv_offsets, ctx)) return;
    declined(ctx, local_);
  }
  (void)network_.alltoall(input, output, send_counts, send_offsets, recv_counts, recv_offsets, ctx);
}

void EngineRouter::barrier(const OpContext& ctx) {
  const OpTraits op{OpKind::Barrier, 0, DType::UInt8, EngineOp::SUM, network_.device()};
  if (local_first(op, ctx)) {
    if (local_->barrier(ctx)) return;
    declined(ctx, local_);
  }
  (void)network_.barrier(ctx);
}

}  // namespace braid::collectives
