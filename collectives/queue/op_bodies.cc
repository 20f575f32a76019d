// The lane bodies of the collectives (op_bodies.h).
#include "collectives/queue/op_bodies.h"

#include <algorithm>

#include "collectives/queue/flat_buffers.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/shape_ops.h"
#include "tensor/sparse.h"

namespace braid::collectives::bodies {

namespace {

void scale_in_place(const Tensor& buf, double factor) {
  if (buf.numel() > 0) buf.copy_(braid::mul(buf, Scalar(factor)));
}

// PREMUL_SUM multiplies the inputs before the sum.
void pre_scale(const Tensor& buf, ReduceOp op) {
  if (op.kind == ReduceOp::PREMUL_SUM) scale_in_place(buf, op.premul_factor);
}

// AVG divides the sum by the number of ranks afterwards.
void post_scale(const Tensor& buf, ReduceOp op, int size) {
  if (op.kind == ReduceOp::AVG) scale_in_place(buf, 1.0 / size);
}

TensorList concat_lists(const std::vector<TensorList>& lists) {
  TensorList out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  return out;
}

// The buffers the ops pack are contiguous: a 1-D one is its own flat view (and costs no allocation).
Tensor flat_view(const Tensor& t) { return t.dim() == 1 && t.is_contiguous() ? t : t.view({t.numel()}); }

DType reduce_dtype(const Env& env, DType dtype) { return flat::reduce_dtype(dtype, env.router.network().reduces(dtype)); }

}  // namespace

TensorList broadcast(const Env& env, const TensorList& ts, int root, size_t root_tensor, const OpContext& ctx) {
  const Tensor& source = env.rank == root ? ts[root_tensor] : ts[0];
  Tensor buf = flat::as_buffer(source, flat::move_dtype(source.dtype()));
  if (buf.numel() > 0) {
    Tensor flat = flat_view(buf);
    env.router.broadcast(flat, root, ctx);
  }
  for (const auto& t : ts) flat::copy_into(t, buf);
  return ts;
}

TensorList allreduce(const Env& env, const TensorList& ts, ReduceOp op, const OpContext& ctx) {
  const DType dtype = ts[0].dtype();
  const DType rd = reduce_dtype(env, dtype);
  const EngineOp eop = flat::engine_op(op, dtype);
  Tensor buf = ts.size() == 1 ? flat_view(flat::as_buffer(ts[0], rd)) : flat::reduce_local(ts, eop, rd);
  if (buf.numel() > 0) {
    pre_scale(buf, op);
    env.router.allreduce(buf, eop, ctx);
    post_scale(buf, op, env.size);
  }
  for (const auto& t : ts) flat::copy_into(t, buf);
  return ts;
}

TensorList allreduce_coalesced(const Env& env, const TensorList& ts, ReduceOp op, const OpContext& ctx) {
  const DType dtype = ts[0].dtype();
  const DType rd = reduce_dtype(env, dtype);
  const EngineOp eop = flat::engine_op(op, dtype);
  Tensor flat = flat::pack(ts, rd);
  if (flat.numel() > 0) {
    pre_scale(flat, op);
    env.router.allreduce_coalesced(flat, eop, ctx);
    post_scale(flat, op, env.size);
  }
  flat::unpack(flat, ts);
  return ts;
}

TensorList reduce(const Env& env, const TensorList& ts, ReduceOp op, int root, const OpContext& ctx) {
  const DType dtype = ts[0].dtype();
  const DType rd = reduce_dtype(env, dtype);
  const EngineOp eop = flat::engine_op(op, dtype);
  // A fresh buffer even when the tensor is contiguous: engines may use it as scratch on non-roots, whose
  // tensor must keep its value.
  Tensor buf = env.rank == root ? flat_view(flat::as_buffer(ts[0], rd)) : flat::pack(ts, rd).clone();
  if (buf.numel() > 0) {
    pre_scale(buf, op);
    env.router.reduce(buf, eop, root, ctx);
    if (env.rank == root) post_scale(buf, op, env.size);
  }
  if (env.rank == root) flat::copy_into(ts[0], buf);
  return ts;
}

TensorList allgather(const Env& env, const std::vector<TensorList>& outs, const TensorList& ins, const OpContext& ctx) {
  const DType dt = flat::move_dtype(ins[0].dtype());
  Tensor in = flat::pack(ins, dt);
  Tensor out = flat::flat_buffer(in.numel() * env.size, dt, ins[0].device());
  if (in.numel() > 0) env.router.allgather(in, out, ctx);
  for (const auto& list : outs) flat::unpack(out, list);
  return concat_lists(outs);
}

TensorList allgather_into_tensor(const Env& env, const Tensor& output, const Tensor& input, const OpContext& ctx) {
  const DType dt = flat::move_dtype(input.dtype());
  Tensor in = flat_view(flat::as_buffer(input, dt));
  Tensor out = flat_view(flat::as_buffer(output, dt));
  if (in.numel() > 0) env.router.allgather(in, out, ctx);
  flat::copy_into(output, out);
  return TensorList{output};
}

TensorList allgather_coalesced(const Env& env, const std::vector<TensorList>& outs, const TensorList& ins,
                               const OpContext& ctx) {
  const DType dt = flat::move_dtype(ins[0].dtype());
  Tensor in = flat::pack(ins, dt);
  Tensor out = flat::flat_buffer(in.numel() * env.size, dt, ins[0].device());
  if (in.numel() > 0) env.router.allgather(in, out, ctx);
  for (size_t r = 0; r < outs.size(); ++r) flat::unpack(out, outs[r], static_cast<int64_t>(r) * in.numel());
  return concat_lists(outs);
}

TensorList allgather_into_tensor_coalesced(const Env& env, const TensorList& outs, const TensorList& ins,
                                           const OpContext& ctx) {
  const DType dt = flat::move_dtype(ins[0].dtype());
  const Device device = ins[0].device();
  Tensor in = flat::pack(ins, dt);
  const int64_t total = in.numel();
  Tensor out = flat::flat_buffer(total * env.size, dt, device);
  if (total > 0) env.router.allgather(in, out, ctx);
  const Tensor blocks = out.view({env.size, total});
  int64_t offset = 0;
  for (const Tensor& o : outs) {
    const int64_t n = o.numel() / env.size;
    const Tensor pieces = blocks.narrow(1, offset, n);  // piece `offset` of every rank's block
    if (o.is_contiguous() && o.dtype() == dt) {
      o.view({env.size, n}).copy_(pieces);
    } else {
      Tensor staged = flat::flat_buffer(n * env.size, dt, device);
      staged.view({env.size, n}).copy_(pieces);
      flat::unpack(staged, {o});
    }
    offset += n;
  }
  return outs;
}

TensorList gather(const Env& env, const std::vector<TensorList>& outs, const TensorList& ins, int root,
                  const OpContext& ctx) {
  const DType dt = flat::move_dtype(ins[0].dtype());
  Tensor in = flat::pack(ins, dt);
  Tensor out;
  if (env.rank == root) out = flat::flat_buffer(in.numel() * env.size, dt, ins[0].device());
  if (in.numel() > 0) env.router.gather(in, out, root, ctx);
  if (env.rank != root) return ins;
  flat::unpack(out, outs[0]);
  return outs[0];
}

TensorList scatter(const Env& env, const TensorList& outs, const std::vector<TensorList>& ins, int root,
                   const OpContext& ctx) {
  const DType dt = flat::move_dtype(outs[0].dtype());
  Tensor out = flat_view(flat::as_buffer(outs[0], dt));
  Tensor in;
  if (env.rank == root) in = flat::pack(ins[0], dt);
  if (out.numel() > 0) env.router.scatter(in, out, root, ctx);
  flat::copy_into(outs[0], out);
  return outs;
}

TensorList reduce_scatter(const Env& env, const TensorList& outs, const TensorList& ins, ReduceOp op,
                          const OpContext& ctx) {
  const DType dtype = outs[0].dtype();
  const DType rd = reduce_dtype(env, dtype);
  const EngineOp eop = flat::engine_op(op, dtype);
  Tensor in = flat::pack(ins, rd);
  // PREMUL_SUM scales the input: never the caller's own tensor (pack aliases a single one).
  if (op.kind == ReduceOp::PREMUL_SUM && in.data_ptr() == ins[0].data_ptr()) in = in.clone();
  Tensor out = flat_view(flat::as_buffer(outs[0], rd));
  if (out.numel() > 0) {
    pre_scale(in, op);
    env.router.reduce_scatter(in, out, eop, ctx);
    post_scale(out, op, env.size);
  }
  flat::copy_into(outs[0], out);
  return outs;
}

TensorList reduce_scatter_tensor(const Env& env, const Tensor& output, const Tensor& input, ReduceOp op,
                                 bool input_is_scratch, const OpContext& ctx) {
  const DType dtype = output.dtype();
  const DType rd = reduce_dtype(env, dtype);
  const EngineOp eop = flat::engine_op(op, dtype);
  Tensor in = flat_view(flat::as_buffer(input, rd));
  // PREMUL_SUM scales the input: never the caller's own tensor.
  if (op.kind == ReduceOp::PREMUL_SUM && in.data_ptr() == input.data_ptr()) in = in.clone();
  Tensor out = flat_view(flat::as_buffer(output, rd));
  if (out.numel() > 0) {
    pre_scale(in, op);
    OpContext engine_ctx = ctx;
    engine_ctx.input_is_scratch = input_is_scratch || in.data_ptr() != input.data_ptr();
    env.router.reduce_scatter(in, out, eop, engine_ctx);
    post_scale(out, op, env.size);
  }
  flat::copy_into(output, out);
  return TensorList{output};
}

TensorList reduce_scatter_tensor_coalesced(const Env& env, const TensorList& outs, const TensorList& ins, ReduceOp op,
                                           const OpContext& ctx) {
  const DType dtype = ins[0].dtype();
  const DType rd = reduce_dtype(env, dtype);
  const EngineOp eop = flat::engine_op(op, dtype);
  const Device device = ins[0].device();
  int64_t total = 0;
  for (const Tensor& o : outs) total += o.numel();
  if (total == 0) return outs;
  Tensor in = flat::flat_buffer(total * env.size, rd, device);
  const Tensor chunks = in.view({env.size, total});
  int64_t offset = 0;
  for (size_t i = 0; i < ins.size(); ++i) {
    const int64_t n = outs[i].numel();
    chunks.narrow(1, offset, n).copy_(flat::as_buffer(ins[i], rd).view({env.size, n}));
    offset += n;
  }
  Tensor out = flat::flat_buffer(total, rd, device);
  pre_scale(in, op);
  OpContext engine_ctx = ctx;
  engine_ctx.input_is_scratch = true;  // `in` is this op's own buffer
  env.router.reduce_scatter(in, out, eop, engine_ctx);
  post_scale(out, op, env.size);
  flat::unpack(out, outs);
  return outs;
}

TensorList alltoall(const Env& env, const TensorList& outs, const TensorList& ins, const OpContext& ctx) {
  const DType dt = flat::move_dtype(ins[0].dtype());
  std::vector<int64_t> sc, so, rc, ro;
  int64_t s_off = 0, r_off = 0;
  for (size_t r = 0; r < ins.size(); ++r) {
    sc.push_back(ins[r].numel());
    so.push_back(s_off);
    s_off += ins[r].numel();
    rc.push_back(outs[r].numel());
    ro.push_back(r_off);
    r_off += outs[r].numel();
  }
  Tensor in = flat::pack(ins, dt);
  Tensor out = flat::flat_buffer(r_off, dt, ins[0].device());
  env.router.alltoall(in, out, sc, so, rc, ro, ctx);
  flat::unpack(out, outs);
  return outs;
}

TensorList alltoall_single(const Env& env, const Tensor& output, const Tensor& input, const AlltoallLayout& layout,
                           const OpContext& ctx) {
  const DType dt = flat::move_dtype(input.dtype());
  Tensor in = flat_view(flat::as_buffer(input, dt));
  Tensor out = flat_view(flat::as_buffer(output, dt));
  env.router.alltoall(in, out, layout.send_counts, layout.send_offsets, layout.recv_counts, layout.recv_offsets, ctx);
  flat::copy_into(output, out);
  return TensorList{output};
}

TensorList barrier(const Env& env, const std::vector<std::shared_ptr<Work>>& earlier, const OpContext& ctx) {
  for (const auto& w : earlier) w->wait(ctx.deadline.remaining());
  env.router.barrier(ctx);
  return TensorList{};
}

TensorList sparse_allreduce(const Env& env, const TensorList& tensors, const OpContext& ctx) {
  SparseTensor local = tensors[0].sparse().coalesce();
  for (size_t i = 1; i < tensors.size(); ++i) local = local.add(tensors[i].sparse());
  const int64_t sparse_dim = local.sparse_dim();
  const int64_t nnz = local.nnz();
  const Shape dense_shape(local.values().shape().begin() + 1, local.values().shape().end());
  const int64_t row_numel = shape_numel(dense_shape);

  // 1. How many entries each rank has.
  Tensor count = Tensor::empty({1}, TensorOptions(DType::Int64));
  count.data<int64_t>()[0] = nnz;
  Tensor counts = Tensor::empty({env.size}, TensorOptions(DType::Int64));
  env.router.allgather(count, counts, ctx);
  const auto* per_rank = counts.data<int64_t>();
  const int64_t max_nnz = *std::max_element(per_rank, per_rank + env.size);

  // 2. Indices and values, padded to the largest count so a fixed-size allgather carries them.
  const DType vdt = flat::move_dtype(local.dtype());
  Tensor indices = Tensor::empty({sparse_dim, max_nnz}, TensorOptions(DType::Int64));
  Shape vshape{max_nnz};
  vshape.insert(vshape.end(), dense_shape.begin(), dense_shape.end());
  Tensor values = Tensor::empty(vshape, TensorOptions(vdt));
  if (nnz > 0) {
    indices.narrow(1, 0, nnz).copy_(local.indices());
    values.narrow(0, 0, nnz).copy_(local.values().to(vdt));
  }
  Tensor all_indices = Tensor::empty({env.size * sparse_dim * max_nnz}, TensorOptions(DType::Int64));
  Tensor all_values = Tensor::empty({env.size * max_nnz * row_numel}, TensorOptions(vdt));
  if (max_nnz > 0) {
    env.router.allgather(flat_view(indices), all_indices, ctx);
    env.router.allgather(flat_view(values), all_values, ctx);
  }

  // 3. Every rank concatenates the same pieces in rank order, so every rank sums identically.
  std::vector<Tensor> index_parts, value_parts;
  for (int r = 0; r < env.size; ++r) {
    const int64_t n = per_rank[r];
    if (n == 0) continue;
    index_parts.push_back(all_indices.narrow(0, r * sparse_dim * max_nnz, sparse_dim * max_nnz)
                              .view({sparse_dim, max_nnz})
                              .narrow(1, 0, n));
    value_parts.push_back(all_values.narrow(0, r * max_nnz * row_numel, max_nnz * row_numel).view(vshape).narrow(0, 0, n));
  }
  SparseTensor result;
  if (index_parts.empty()) {
    Shape empty_vshape{0};
    empty_vshape.insert(empty_vshape.end(), dense_shape.begin(), dense_shape.end());
    result = SparseTensor(Tensor::empty({sparse_dim, 0}, TensorOptions(DType::Int64)),
                          Tensor::empty(empty_vshape, TensorOptions(local.dtype())), local.shape(), true);
  } else {
    result = SparseTensor(braid::cat(index_parts, 1).contiguous(), braid::cat(value_parts, 0).to(local.dtype()).contiguous(),
                          local.shape())
                 .coalesce();
  }
  const Tensor reduced = result.to_tensor();
  for (const auto& t : tensors) t.set_data(reduced);
  return tensors;
}

}  // namespace braid::collectives::bodies
