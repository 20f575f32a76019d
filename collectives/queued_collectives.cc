// QueuedProcessGroup's collectives: each checks its arguments on the calling thread (before anything is
// communicated), then queues a body that stages the tensors (collectives/staging.h), calls the engine
// primitive and copies the results back. Future values follow SPEC B.2.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>

#include "base/check.h"
#include "collectives/queued_process_group.h"
#include "collectives/staging.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/shape_ops.h"
#include "tensor/sparse.h"

namespace braid::collectives {

namespace {

std::string describe_tensors(const TensorList& ts) {
  std::string out;
  for (const auto& t : ts) out += fmt::format(" {}{}", t.dtype(), shape_str(t.shape()));
  return out;
}

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

// The buffers the ops stage are contiguous: a 1-D one is its own flat view (and costs no allocation).
Tensor flat_view(const Tensor& t) { return t.dim() == 1 && t.is_contiguous() ? t : t.view({t.numel()}); }

int64_t total_bytes(const TensorList& ts) {
  int64_t n = 0;
  for (const auto& t : ts) n += static_cast<int64_t>(t.nbytes());
  return n;
}

}  // namespace

std::shared_ptr<Work> QueuedProcessGroup::broadcast(TensorList& tensors, const BroadcastOptions& options) {
  const auto c = caller("broadcast");
  checks::root_rank(c, options.root_rank);
  checks::root_tensor(c, options.root_tensor, tensors.size());
  checks::dense(c, tensors);
  checks::same_type_and_size(c, tensors);
  checks::device(c, tensors, accepts_cuda(), accepts_cpu());
  const int root = static_cast<int>(options.root_rank);
  const auto index = static_cast<size_t>(options.root_tensor);
  const std::string sig = detail_ ? fmt::format("broadcast root={}{}", root, describe_tensors({tensors[0]})) : "";
  return enqueue({"broadcast", options.timeout, tensors[0].device(), sig, static_cast<int64_t>(tensors[0].nbytes())},
                 [this, ts = tensors, root, index](const OpContext& ctx) {
                   const Tensor& source = rank() == root ? ts[index] : ts[0];
                   Tensor buf = staging::as_buffer(source, staging::move_dtype(source.dtype()));
                   if (buf.numel() > 0) {
                     Tensor flat = flat_view(buf);
                     if (!try_shared_broadcast(flat, root, ctx)) run_broadcast(flat, root, ctx);
                   }
                   for (const auto& t : ts) staging::copy_into(t, buf);
                   return ts;
                 });
}

std::shared_ptr<Work> QueuedProcessGroup::allreduce(TensorList& tensors, const AllreduceOptions& options) {
  const auto c = caller("allreduce");
  checks::non_empty(c, tensors);
  checks::all_sparse_or_dense(c, tensors);
  const bool sparse = tensors[0].is_sparse();
  checks::reduce_op(c, options.reduce_op, tensors[0].dtype(), sparse);
  check_engine_reduce(c, options.reduce_op, tensors[0].dtype(), sparse);
  if (sparse) {
    const auto& first = tensors[0].sparse();
    for (size_t i = 1; i < tensors.size(); ++i) {
      const auto& s = tensors[i].sparse();
      if (s.dtype() != first.dtype()) {
        checks::fail(c, fmt::format("invalid tensor type at index {} (expected {}, got {})", i, first.dtype(), s.dtype()));
      }
      if (s.shape() != first.shape()) {
        checks::fail(c, fmt::format("invalid tensor size at index {} (expected {}, got {})", i, shape_str(first.shape()),
                                    shape_str(s.shape())));
      }
    }
    const std::string sig = detail_ ? fmt::format("sparse allreduce {}{}", first.dtype(), shape_str(first.shape())) : "";
    return enqueue({"allreduce", options.timeout, Device::cpu(), sig},
                   [this, ts = tensors](const OpContext& ctx) { return sparse_allreduce(ts, ctx); });
  }
  checks::same_type_and_size(c, tensors);
  checks::device(c, tensors, accepts_cuda(), accepts_cpu());
  const ReduceOp op = options.reduce_op;
  const std::string sig = detail_ ? fmt::format("allreduce {}{}", op, describe_tensors({tensors[0]})) : "";
  return enqueue({"allreduce", options.timeout, tensors[0].device(), sig, static_cast<int64_t>(tensors[0].nbytes())}, [this, ts = tensors, op](const OpContext& ctx) {
    const DType dtype = ts[0].dtype();
    const DType rd = staging::reduce_dtype(dtype, engine_reduces(dtype));
    const EngineOp eop = staging::engine_op(op, dtype);
    Tensor buf = ts.size() == 1 ? flat_view(staging::as_buffer(ts[0], rd)) : staging::reduce_local(ts, eop, rd);
    if (buf.numel() > 0) {
      pre_scale(buf, op);
      if (!try_shared_allreduce(buf, eop, ctx)) run_allreduce(buf, eop, ctx);
      post_scale(buf, op, size());
    }
    for (const auto& t : ts) staging::copy_into(t, buf);
    return ts;
  });
}

std::shared_ptr<Work> QueuedProcessGroup::allreduce_coalesced(TensorList& tensors,
                                                              const AllreduceCoalescedOptions& options) {
  const auto c = caller("allreduce_coalesced");
  checks::non_empty(c, tensors);
  checks::all_sparse_or_dense(c, tensors);
  if (tensors[0].is_sparse()) checks::fail(c, "unsupported layout: allreduce_coalesced needs dense tensors");
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].dtype() != tensors[0].dtype()) {
      checks::fail(c, fmt::format("tensors must all have the same type (index {} is {}, index 0 is {})", i,
                                  tensors[i].dtype(), tensors[0].dtype()));
    }
  }
  checks::device(c, tensors, accepts_cuda(), accepts_cpu());
  const ReduceOp op = options.reduce_op;
  checks::reduce_op(c, op, tensors[0].dtype(), false);
  check_engine_reduce(c, op, tensors[0].dtype(), false);
  const std::string sig = detail_ ? fmt::format("allreduce_coalesced {}{}", op, describe_tensors(tensors)) : "";
  return enqueue({"allreduce_coalesced", options.timeout, tensors[0].device(), sig, total_bytes(tensors)},
                 [this, ts = tensors, op](const OpContext& ctx) {
                   const DType dtype = ts[0].dtype();
                   const DType rd = staging::reduce_dtype(dtype, engine_reduces(dtype));
                   const EngineOp eop = staging::engine_op(op, dtype);
                   Tensor flat = staging::pack(ts, rd);
                   if (flat.numel() > 0) {
                     pre_scale(flat, op);
                     run_allreduce(flat, eop, ctx);
                     post_scale(flat, op, size());
                   }
                   staging::unpack(flat, ts);
                   return ts;
                 });
}

std::shared_ptr<Work> QueuedProcessGroup::reduce(TensorList& tensors, const ReduceOptions& options) {
  const auto c = caller("reduce");
  checks::root_rank(c, options.root_rank);
  checks::root_tensor(c, options.root_tensor, tensors.size());
  if (tensors.size() != 1) checks::fail(c, fmt::format("requires a single-element tensor list, got {}", tensors.size()));
  checks::dense(c, tensors);
  checks::device(c, tensors, accepts_cuda(), accepts_cpu());
  const ReduceOp op = options.reduce_op;
  checks::reduce_op(c, op, tensors[0].dtype(), false);
  check_engine_reduce(c, op, tensors[0].dtype(), false);
  const int root = static_cast<int>(options.root_rank);
  const std::string sig = detail_ ? fmt::format("reduce {} root={}{}", op, root, describe_tensors(tensors)) : "";
  return enqueue({"reduce", options.timeout, tensors[0].device(), sig, static_cast<int64_t>(tensors[0].nbytes())},
                 [this, ts = tensors, op, root](const OpContext& ctx) {
                   const DType dtype = ts[0].dtype();
                   const DType rd = staging::reduce_dtype(dtype, engine_reduces(dtype));
                   const EngineOp eop = staging::engine_op(op, dtype);
                   // A fresh buffer even when the tensor is contiguous: engines may use it as scratch on
                   // non-roots, whose tensor must keep its value.
                   Tensor buf = rank() == root ? flat_view(staging::as_buffer(ts[0], rd)) : staging::pack(ts, rd).clone();
                   if (buf.numel() > 0) {
                     pre_scale(buf, op);
                     run_reduce(buf, eop, root, ctx);
                     if (rank() == root) post_scale(buf, op, size());
                   }
                   if (rank() == root) staging::copy_into(ts[0], buf);
                   return ts;
                 });
}

std::shared_ptr<Work> QueuedProcessGroup::allgather(std::vector<TensorList>& outputs, TensorList& inputs,
                                                    const AllgatherOptions& options) {
  const auto c = caller("allgather");
  checks::allgather_lists(c, outputs, inputs);
  checks::dense(c, inputs);
  checks::device(c, inputs, accepts_cuda(), accepts_cpu());
  for (const auto& out : outputs) checks::device(c, out, accepts_cuda(), accepts_cpu());
  const std::string sig = detail_ ? fmt::format("allgather{}", describe_tensors(inputs)) : "";
  return enqueue({"allgather", options.timeout, inputs[0].device(), sig, total_bytes(inputs) * size()},
                 [this, outs = outputs, ins = inputs](const OpContext& ctx) {
                   const DType dt = staging::move_dtype(ins[0].dtype());
                   Tensor in = staging::pack(ins, dt);
                   Tensor out = staging::flat_buffer(in.numel() * size(), dt, ins[0].device());
                   if (in.numel() > 0) allgather_flat(in, out, ctx);
                   for (const auto& list : outs) staging::unpack(out, list);
                   return concat_lists(outs);
                 });
}

std::shared_ptr<Work> QueuedProcessGroup::allgather_into_tensor(Tensor& output, Tensor& input,
                                                                const AllgatherOptions& options) {
  const auto c = caller("allgather_into_tensor");
  checks::dense(c, {output, input});
  checks::device(c, {output, input}, accepts_cuda(), accepts_cpu());
  if (output.dtype() != input.dtype()) {
    checks::fail(c, fmt::format("invalid tensor type: output is {}, input is {}", output.dtype(), input.dtype()));
  }
  if (output.numel() != input.numel() * size()) {
    checks::fail(c, fmt::format("invalid tensor size: output has {} elements, expected {} (world size {} x input {})",
                                output.numel(), input.numel() * size(), size(), input.numel()));
  }
  const std::string sig = detail_ ? fmt::format("allgather_into_tensor{}", describe_tensors({input})) : "";
  return enqueue({"allgather_into_tensor", options.timeout, input.device(), sig, static_cast<int64_t>(output.nbytes())},
                 [this, output, input](const OpContext& ctx) {
                   const DType dt = staging::move_dtype(input.dtype());
                   Tensor in = flat_view(staging::as_buffer(input, dt));
                   Tensor out = flat_view(staging::as_buffer(output, dt));
                   if (in.numel() > 0) allgather_flat(in, out, ctx);
                   staging::copy_into(output, out);
                   return TensorList{output};
                 });
}

std::shared_ptr<Work> QueuedProcessGroup::allgather_coalesced(std::vector<TensorList>& outputs, TensorList& inputs,
                                                              const AllgatherOptions& options) {
  const auto c = caller("allgather_coalesced");
  checks::non_empty(c, inputs, "input tensor list");
  checks::dense(c, inputs);
  checks::same_type(c, inputs);
  checks::device(c, inputs, accepts_cuda(), accepts_cpu());
  if (outputs.size() != static_cast<size_t>(size())) {
    checks::fail(c, fmt::format("output lists should be equal to world size (got {} lists, world size {})",
                                outputs.size(), size()));
  }
  for (const auto& list : outputs) {
    if (list.size() != inputs.size()) {
      checks::fail(c, fmt::format("invalid output tensor list: {} tensors for {} inputs", list.size(), inputs.size()));
    }
    for (size_t j = 0; j < list.size(); ++j) {
      if (list[j].dtype() != inputs[j].dtype()) {
        checks::fail(c, fmt::format("invalid tensor type at index {} (expected {}, got {})", j, inputs[j].dtype(),
                                    list[j].dtype()));
      }
      if (list[j].numel() != inputs[j].numel()) {
        checks::fail(c, fmt::format("invalid size of output tensor at index {} (expected {} elements, got {})", j,
                                    inputs[j].numel(), list[j].numel()));
      }
    }
    checks::device(c, list, accepts_cuda(), accepts_cpu());
  }
  const std::string sig = detail_ ? fmt::format("allgather_coalesced{}", describe_tensors(inputs)) : "";
  return enqueue({"allgather_coalesced", options.timeout, inputs[0].device(), sig, total_bytes(inputs) * size()},
                 [this, outs = outputs, ins = inputs](const OpContext& ctx) {
                   const DType dt = staging::move_dtype(ins[0].dtype());
                   Tensor in = staging::pack(ins, dt);
                   Tensor out = staging::flat_buffer(in.numel() * size(), dt, ins[0].device());
                   if (in.numel() > 0) allgather_flat(in, out, ctx);
                   for (size_t r = 0; r < outs.size(); ++r) staging::unpack(out, outs[r], static_cast<int64_t>(r) * in.numel());
                   return concat_lists(outs);
                 });
}

std::shared_ptr<Work> QueuedProcessGroup::gather(std::vector<TensorList>& outputs, TensorList& inputs,
                                                 const GatherOptions& options) {
  const auto c = caller("gather");
  checks::gather_lists(c, options.root_rank, outputs, inputs);
  checks::dense(c, inputs);
  checks::device(c, inputs, accepts_cuda(), accepts_cpu());
  if (!outputs.empty()) checks::device(c, outputs[0], accepts_cuda(), accepts_cpu());
  const int root = static_cast<int>(options.root_rank);
  const std::string sig = detail_ ? fmt::format("gather root={}{}", root, describe_tensors(inputs)) : "";
  return enqueue({"gather", options.timeout, inputs[0].device(), sig, total_bytes(inputs)},
                 [this, outs = outputs, ins = inputs, root](const OpContext& ctx) {
                   const DType dt = staging::move_dtype(ins[0].dtype());
                   Tensor in = staging::pack(ins, dt);
                   Tensor out;
                   if (rank() == root) out = staging::flat_buffer(in.numel() * size(), dt, ins[0].device());
                   if (in.numel() > 0) run_gather(in, out, root, ctx);
                   if (rank() != root) return ins;
                   staging::unpack(out, outs[0]);
                   return outs[0];
                 });
}

std::shared_ptr<Work> QueuedProcessGroup::scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                                  const ScatterOptions& options) {
  const auto c = caller("scatter");
  checks::scatter_lists(c, options.root_rank, outputs, inputs);
  checks::dense(c, outputs);
  checks::device(c, outputs, accepts_cuda(), accepts_cpu());
  if (!inputs.empty()) checks::device(c, inputs[0], accepts_cuda(), accepts_cpu());
  const int root = static_cast<int>(options.root_rank);
  const std::string sig = detail_ ? fmt::format("scatter root={}{}", root, describe_tensors(outputs)) : "";
  return enqueue({"scatter", options.timeout, outputs[0].device(), sig, total_bytes(outputs)},
                 [this, outs = outputs, ins = inputs, root](const OpContext& ctx) {
                   const DType dt = staging::move_dtype(outs[0].dtype());
                   Tensor out = flat_view(staging::as_buffer(outs[0], dt));
                   Tensor in;
                   if (rank() == root) in = staging::pack(ins[0], dt);
                   if (out.numel() > 0) run_scatter(in, out, root, ctx);
                   staging::copy_into(outs[0], out);
                   return outs;
                 });
}

std::shared_ptr<Work> QueuedProcessGroup::reduce_scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                                         const ReduceScatterOptions& options) {
  const auto c = caller("reduce_scatter");
  if (outputs.size() != 1) checks::fail(c, fmt::format("requires a single-element output tensor list, got {}", outputs.size()));
  if (inputs.size() != 1) checks::fail(c, fmt::format("requires a single-element input list, got {}", inputs.size()));
  if (inputs[0].size() != static_cast<size_t>(size())) {
    checks::fail(c, fmt::format("invalid input tensor list: {} tensors, expected the world size {}", inputs[0].size(), size()));
  }
  checks::dense(c, outputs);
  checks::dense(c, inputs[0]);
  checks::same_type_and_size(c, inputs[0], &outputs[0]);
  checks::device(c, outputs, accepts_cuda(), accepts_cpu());
  checks::device(c, inputs[0], accepts_cuda(), accepts_cpu());
  const ReduceOp op = options.reduce_op;
  checks::reduce_op(c, op, outputs[0].dtype(), false);
  check_engine_reduce(c, op, outputs[0].dtype(), false);
  const std::string sig = detail_ ? fmt::format("reduce_scatter {}{}", op, describe_tensors(outputs)) : "";
  return enqueue({"reduce_scatter", options.timeout, outputs[0].device(), sig, total_bytes(inputs[0])},
                 [this, outs = outputs, ins = inputs[0], op](const OpContext& ctx) {
                   const DType dtype = outs[0].dtype();
                   const DType rd = staging::reduce_dtype(dtype, engine_reduces(dtype));
                   const EngineOp eop = staging::engine_op(op, dtype);
                   Tensor in = staging::pack(ins, rd);
                   // PREMUL_SUM scales the input: never the caller's own tensor (pack aliases a single one).
                   if (op.kind == ReduceOp::PREMUL_SUM && in.data_ptr() == ins[0].data_ptr()) in = in.clone();
                   Tensor out = flat_view(staging::as_buffer(outs[0], rd));
                   if (out.numel() > 0) {
                     pre_scale(in, op);
                     reduce_scatter_flat(in, out, eop, ctx);
                     post_scale(out, op, size());
                   }
                   staging::copy_into(outs[0], out);
                   return outs;
                 });
}

std::shared_ptr<Work> QueuedProcessGroup::reduce_scatter_tensor(Tensor& output, Tensor& input,
                                                                const ReduceScatterOptions& options) {
  const auto c = caller("reduce_scatter_tensor");
  checks::dense(c, {output, input});
  checks::device(c, {output, input}, accepts_cuda(), accepts_cpu());
  if (output.dtype() != input.dtype()) {
    checks::fail(c, fmt::format("invalid tensor type: output is {}, input is {}", output.dtype(), input.dtype()));
  }
  if (input.numel() != output.numel() * size()) {
    checks::fail(c, fmt::format("invalid tensor size: input has {} elements, expected {} (world size {} x output {})",
                                input.numel(), output.numel() * size(), size(), output.numel()));
  }
  const ReduceOp op = options.reduce_op;
  checks::reduce_op(c, op, output.dtype(), false);
  check_engine_reduce(c, op, output.dtype(), false);
  const std::string sig = detail_ ? fmt::format("reduce_scatter_tensor {}{}", op, describe_tensors({output})) : "";
  return enqueue({"reduce_scatter_tensor", options.timeout, output.device(), sig, static_cast<int64_t>(input.nbytes())},
                 [this, output, input, op, scratch = options.input_is_scratch](const OpContext& ctx) {
                   const DType dtype = output.dtype();
                   const DType rd = staging::reduce_dtype(dtype, engine_reduces(dtype));
                   const EngineOp eop = staging::engine_op(op, dtype);
                   Tensor in = flat_view(staging::as_buffer(input, rd));
                   // PREMUL_SUM scales the input: never the caller's own tensor.
                   if (op.kind == ReduceOp::PREMUL_SUM && in.data_ptr() == input.data_ptr()) in = in.clone();
                   Tensor out = flat_view(staging::as_buffer(output, rd));
                   if (out.numel() > 0) {
                     pre_scale(in, op);
                     OpContext engine_ctx = ctx;
                     engine_ctx.input_is_scratch = scratch || in.data_ptr() != input.data_ptr();
                     reduce_scatter_flat(in, out, eop, engine_ctx);
                     post_scale(out, op, size());
                   }
                   staging::copy_into(output, out);
                   return TensorList{output};
                 });
}

std::shared_ptr<Work> QueuedProcessGroup::alltoall(TensorList& outputs, TensorList& inputs,
                                                   const AllToAllOptions& options) {
  const auto c = caller("alltoall");
  const auto n = static_cast<size_t>(size());
  if (inputs.size() != n) checks::fail(c, fmt::format("invalid input tensor list: {} tensors, expected {}", inputs.size(), n));
  if (outputs.size() != n) checks::fail(c, fmt::format("invalid output tensor list: {} tensors, expected {}", outputs.size(), n));
  checks::dense(c, inputs);
  checks::dense(c, outputs);
  checks::same_type(c, inputs);
  checks::same_type(c, outputs, &inputs[0]);
  checks::device(c, inputs, accepts_cuda(), accepts_cpu());
  checks::device(c, outputs, accepts_cuda(), accepts_cpu());
  const std::string sig = detail_ ? fmt::format("alltoall {}", inputs[0].dtype()) : "";
  return enqueue({"alltoall", options.timeout, inputs[0].device(), sig, total_bytes(inputs)},
                 [this, outs = outputs, ins = inputs](const OpContext& ctx) {
                   const DType dt = staging::move_dtype(ins[0].dtype());
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
                   Tensor in = staging::pack(ins, dt);
                   Tensor out = staging::flat_buffer(r_off, dt, ins[0].device());
                   alltoall_flat(in, out, sc, so, rc, ro, ctx);
                   staging::unpack(out, outs);
                   return outs;
                 });
}

std::shared_ptr<Work> QueuedProcessGroup::alltoall_single(Tensor& output, Tensor& input,
                                                          const std::vector<int64_t>& output_splits,
                                                          const std::vector<int64_t>& input_splits,
                                                          const AllToAllOptions& options) {
  const auto c = caller("alltoall_single");
  checks::dense(c, {output, input});
  checks::device(c, {output, input}, accepts_cuda(), accepts_cpu());
  if (output.dtype() != input.dtype()) {
    checks::fail(c, fmt::format("invalid tensor type: output is {}, input is {}", output.dtype(), input.dtype()));
  }
  // Element counts per rank from split sizes along dim 0 (equal splits when the list is empty).
  auto counts_of = [&](const Tensor& t, const std::vector<int64_t>& splits, const char* which) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const int64_t row_numel = rows == 0 ? 0 : t.numel() / rows;
    std::vector<int64_t> counts;
    if (splits.empty()) {
      if (rows % size() != 0) {
        checks::fail(c, fmt::format("invalid {} tensor size: dim 0 is {}, not divisible by the world size {}", which,
                                    rows, size()));
      }
      counts.assign(static_cast<size_t>(size()), rows / size() * row_numel);
      return counts;
    }
    if (splits.size() != static_cast<size_t>(size())) {
      checks::fail(c, fmt::format("invalid {} split sizes: {} entries for world size {}", which, splits.size(), size()));
    }
    if (std::accumulate(splits.begin(), splits.end(), int64_t{0}) != rows ||
        std::any_of(splits.begin(), splits.end(), [](int64_t s) { return s < 0; })) {
      checks::fail(c, fmt::format("invalid {} split sizes {}: they must be non-negative and sum to dim 0 ({})", which,
                                  fmt::join(splits, ", "), rows));
    }
    for (int64_t s : splits) counts.push_back(s * row_numel);
    return counts;
  };
  auto offsets_of = [](const std::vector<int64_t>& counts) {
    std::vector<int64_t> offsets(counts.size(), 0);
    for (size_t i = 1; i < counts.size(); ++i) offsets[i] = offsets[i - 1] + counts[i - 1];
    return offsets;
  };
  auto send_counts = counts_of(input, input_splits, "input");
  auto recv_counts = counts_of(output, output_splits, "output");
  auto send_offsets = offsets_of(send_counts);
  auto recv_offsets = offsets_of(recv_counts);
  const std::string sig = detail_ ? fmt::format("alltoall_single {}", input.dtype()) : "";
  return enqueue({"alltoall_single", options.timeout, input.device(), sig, static_cast<int64_t>(input.nbytes())},
                 [this, output, input, send_counts = std::move(send_counts), recv_counts = std::move(recv_counts),
                  send_offsets = std::move(send_offsets), recv_offsets = std::move(recv_offsets)](const OpContext& ctx) {
                   const DType dt = staging::move_dtype(input.dtype());
                   Tensor in = flat_view(staging::as_buffer(input, dt));
                   Tensor out = flat_view(staging::as_buffer(output, dt));
                   alltoall_flat(in, out, send_counts, send_offsets, recv_counts, recv_offsets, ctx);
                   staging::copy_into(output, out);
                   return TensorList{output};
                 });
}

std::shared_ptr<Work> QueuedProcessGroup::barrier(const BarrierOptions& options) {
  // Every op issued before the barrier, on any lane, must complete before it does.
  auto earlier = incomplete_works();
  return enqueue({"barrier", options.timeout, engine_device(), detail_ ? "barrier" : ""},
                 [this, earlier = std::move(earlier)](const OpContext& ctx) {
                   for (const auto& w : earlier) w->wait(ctx.deadline.remaining());
                   if (!try_staged_barrier(ctx)) run_barrier(ctx);
                   return TensorList{};
                 });
}

TensorList QueuedProcessGroup::sparse_allreduce(const TensorList& tensors, const OpContext& ctx) {
  SparseTensor local = tensors[0].sparse().coalesce();
  for (size_t i = 1; i < tensors.size(); ++i) local = local.add(tensors[i].sparse());
  const int64_t sparse_dim = local.sparse_dim();
  const int64_t nnz = local.nnz();
  const Shape dense_shape(local.values().shape().begin() + 1, local.values().shape().end());
  const int64_t row_numel = shape_numel(dense_shape);

  // 1. How many entries each rank has.
  Tensor count = Tensor::empty({1}, TensorOptions(DType::Int64));
  count.data<int64_t>()[0] = nnz;
  Tensor counts = Tensor::empty({size()}, TensorOptions(DType::Int64));
  allgather_flat(count, counts, ctx);
  const auto* per_rank = counts.data<int64_t>();
  const int64_t max_nnz = *std::max_element(per_rank, per_rank + size());

  // 2. Indices and values, padded to the largest count so a fixed-size allgather carries them.
  const DType vdt = staging::move_dtype(local.dtype());
  Tensor indices = Tensor::empty({sparse_dim, max_nnz}, TensorOptions(DType::Int64));
  Shape vshape{max_nnz};
  vshape.insert(vshape.end(), dense_shape.begin(), dense_shape.end());
  Tensor values = Tensor::empty(vshape, TensorOptions(vdt));
  if (nnz > 0) {
    indices.narrow(1, 0, nnz).copy_(local.indices());
    values.narrow(0, 0, nnz).copy_(local.values().to(vdt));
  }
  Tensor all_indices = Tensor::empty({size() * sparse_dim * max_nnz}, TensorOptions(DType::Int64));
  Tensor all_values = Tensor::empty({size() * max_nnz * row_numel}, TensorOptions(vdt));
  if (max_nnz > 0) {
    allgather_flat(flat_view(indices), all_indices, ctx);
    allgather_flat(flat_view(values), all_values, ctx);
  }

  // 3. Every rank concatenates the same pieces in rank order, so every rank sums identically.
  std::vector<Tensor> index_parts, value_parts;
  for (int r = 0; r < size(); ++r) {
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

}  // namespace braid::collectives
