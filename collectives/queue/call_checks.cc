#include "collectives/queue/call_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>

#include "tensor/sparse.h"

namespace braid::collectives::call_checks {

void check(const checks::Caller& c, const BroadcastCall& call, const Engine& engine) {
  checks::root_rank(c, call.options.root_rank);
  checks::root_tensor(c, call.options.root_tensor, call.tensors.size());
  checks::dense(c, call.tensors);
  checks::same_type_and_size(c, call.tensors);
  checks::device(c, call.tensors, engine.accepts_cuda(), engine.accepts_cpu());
}

void check(const checks::Caller& c, const AllreduceCall& call, const Engine& engine) {
  checks::non_empty(c, call.tensors);
  checks::all_sparse_or_dense(c, call.tensors);
  const bool sparse = call.tensors[0].is_sparse();
  checks::reduce_op(c, call.options.reduce_op, call.tensors[0].dtype(), sparse);
  engine.check_reduce(c, call.options.reduce_op, call.tensors[0].dtype(), sparse);
  if (sparse) {
    const auto& first = call.tensors[0].sparse();
    for (size_t i = 1; i < call.tensors.size(); ++i) {
      const auto& s = call.tensors[i].sparse();
      if (s.dtype() != first.dtype()) {
        checks::fail(c, fmt::format("invalid tensor type at index {} (expected {}, got {})", i, first.dtype(), s.dtype()));
      }
      if (s.shape() != first.shape()) {
        checks::fail(c, fmt::format("invalid tensor size at index {} (expected {}, got {})", i, shape_str(first.shape()),
                                    shape_str(s.shape())));
      }
    }
    return;
  }
  checks::same_type_and_size(c, call.tensors);
  checks::device(c, call.tensors, engine.accepts_cuda(), engine.accepts_cpu());
}

void check(const checks::Caller& c, const AllreduceCoalescedCall& call, const Engine& engine) {
  checks::non_empty(c, call.tensors);
  checks::all_sparse_or_dense(c, call.tensors);
  if (call.tensors[0].is_sparse()) checks::fail(c, "unsupported layout: allreduce_coalesced needs dense tensors");
  for (size_t i = 1; i < call.tensors.size(); ++i) {
    if (call.tensors[i].dtype() != call.tensors[0].dtype()) {
      checks::fail(c, fmt::format("tensors must all have the same type (index {} is {}, index 0 is {})", i,
                                  call.tensors[i].dtype(), call.tensors[0].dtype()));
    }
  }
  checks::device(c, call.tensors, engine.accepts_cuda(), engine.accepts_cpu());
  const ReduceOp op = call.options.reduce_op;
  checks::reduce_op(c, op, call.tensors[0].dtype(), false);
  engine.check_reduce(c, op, call.tensors[0].dtype(), false);
}

void check(const checks::Caller& c, const ReduceCall& call, const Engine& engine) {
  checks::root_rank(c, call.options.root_rank);
  checks::root_tensor(c, call.options.root_tensor, call.tensors.size());
  if (call.tensors.size() != 1) checks::fail(c, fmt::format("requires a single-element tensor list, got {}", call.tensors.size()));
  checks::dense(c, call.tensors);
  checks::device(c, call.tensors, engine.accepts_cuda(), engine.accepts_cpu());
  const ReduceOp op = call.options.reduce_op;
  checks::reduce_op(c, op, call.tensors[0].dtype(), false);
  engine.check_reduce(c, op, call.tensors[0].dtype(), false);
}

void check(const checks::Caller& c, const AllgatherCall& call, const Engine& engine) {
  checks::allgather_lists(c, call.outputs, call.inputs);
  checks::dense(c, call.inputs);
  checks::device(c, call.inputs, engine.accepts_cuda(), engine.accepts_cpu());
  for (const auto& out : call.outputs) checks::device(c, out, engine.accepts_cuda(), engine.accepts_cpu());
}

void check(const checks::Caller& c, const AllgatherIntoTensorCall& call, const Engine& engine) {
  checks::dense(c, {call.output, call.input});
  checks::device(c, {call.output, call.input}, engine.accepts_cuda(), engine.accepts_cpu());
  if (call.output.dtype() != call.input.dtype()) {
    checks::fail(c, fmt::format("invalid tensor type: output is {}, input is {}", call.output.dtype(), call.input.dtype()));
  }
  if (call.output.numel() != call.input.numel() * c.size) {
    checks::fail(c, fmt::format("invalid tensor size: output has {} elements, expected {} (world size {} x input {})",
                                call.output.numel(), call.input.numel() * c.size, c.size, call.input.numel()));
  }
}

void check(const checks::Caller& c, const AllgatherCoalescedCall& call, const Engine& engine) {
  checks::non_empty(c, call.inputs, "input tensor list");
  checks::dense(c, call.inputs);
  checks::same_type(c, call.inputs);
  checks::device(c, call.inputs, engine.accepts_cuda(), engine.accepts_cpu());
  if (call.outputs.size() != static_cast<size_t>(c.size)) {
    checks::fail(c, fmt::format("output lists should be equal to world size (got {} lists, world size {})",
                                call.outputs.size(), c.size));
  }
  for (const auto& list : call.outputs) {
    if (list.size() != call.inputs.size()) {
      checks::fail(c, fmt::format("invalid output tensor list: {} tensors for {} inputs", list.size(), call.inputs.size()));
    }
    for (size_t j = 0; j < list.size(); ++j) {
      if (list[j].dtype() != call.inputs[j].dtype()) {
        checks::fail(c, fmt::format("invalid tensor type at index {} (expected {}, got {})", j, call.inputs[j].dtype(),
                                    list[j].dtype()));
      }
      if (list[j].numel() != call.inputs[j].numel()) {
        checks::fail(c, fmt::format("invalid size of output tensor at index {} (expected {} elements, got {})", j,
                                    call.inputs[j].numel(), list[j].numel()));
      }
    }
    checks::device(c, list, engine.accepts_cuda(), engine.accepts_cpu());
  }
}

namespace {

// The coalesced tensor forms: two lists of one length, dense, of one dtype, on devices the engine takes.
void coalesced_pairs(const checks::Caller& c, const TensorList& outputs, const TensorList& inputs,
                     const Engine& engine) {
  checks::non_empty(c, inputs, "input tensor list");
  if (outputs.size() != inputs.size()) {
    checks::fail(c, fmt::format("requires as many output tensors as input tensors (got {} outputs, {} inputs)",
                                outputs.size(), inputs.size()));
  }
  checks::dense(c, inputs);
  checks::dense(c, outputs);
  checks::same_type(c, inputs);
  checks::same_type(c, outputs, &inputs[0]);
  checks::device(c, inputs, engine.accepts_cuda(), engine.accepts_cpu());
  checks::device(c, outputs, engine.accepts_cuda(), engine.accepts_cpu());
}

// Pair i's `whole` holds world size x its `part`'s elements (the gathered output, the scattered input).
void whole_is_size_times_part(const checks::Caller& c, const TensorList& whole, const char* whole_name,
                              const TensorList& part, const char* part_name) {
  for (size_t i = 0; i < whole.size(); ++i) {
    if (whole[i].numel() != part[i].numel() * c.size) {
      checks::fail(c, fmt::format("invalid tensor size at index {}: {} has {} elements, expected {} (world size {} x "
                                  "{} {})",
                                  i, whole_name, whole[i].numel(), part[i].numel() * c.size, c.size, part_name,
                                  part[i].numel()));
    }
  }
}

}  // namespace

void check(const checks::Caller& c, const AllgatherIntoTensorCoalescedCall& call, const Engine& engine) {
  coalesced_pairs(c, call.outputs, call.inputs, engine);
  whole_is_size_times_part(c, call.outputs, "output", call.inputs, "input");
}

void check(const checks::Caller& c, const ReduceScatterTensorCoalescedCall& call, const Engine& engine) {
  coalesced_pairs(c, call.outputs, call.inputs, engine);
  whole_is_size_times_part(c, call.inputs, "input", call.outputs, "output");
  const ReduceOp op = call.options.reduce_op;
  checks::reduce_op(c, op, call.inputs[0].dtype(), false);
  engine.check_reduce(c, op, call.inputs[0].dtype(), false);
}

void check(const checks::Caller& c, const GatherCall& call, const Engine& engine) {
  checks::gather_lists(c, call.options.root_rank, call.outputs, call.inputs);
  checks::dense(c, call.inputs);
  checks::device(c, call.inputs, engine.accepts_cuda(), engine.accepts_cpu());
  if (!call.outputs.empty()) checks::device(c, call.outputs[0], engine.accepts_cuda(), engine.accepts_cpu());
}

void check(const checks::Caller& c, const ScatterCall& call, const Engine& engine) {
  checks::scatter_lists(c, call.options.root_rank, call.outputs, call.inputs);
  checks::dense(c, call.outputs);
  checks::device(c, call.outputs, engine.accepts_cuda(), engine.accepts_cpu());
  if (!call.inputs.empty()) checks::device(c, call.inputs[0], engine.accepts_cuda(), engine.accepts_cpu());
}

void check(const checks::Caller& c, const ReduceScatterCall& call, const Engine& engine) {
  if (call.outputs.size() != 1) checks::fail(c, fmt::format("requires a single-element output tensor list, got {}", call.outputs.size()));
  if (call.inputs.size() != 1) checks::fail(c, fmt::format("requires a single-element input list, got {}", call.inputs.size()));
  if (call.inputs[0].size() != static_cast<size_t>(c.size)) {
    checks::fail(c, fmt::format("invalid input tensor list: {} tensors, expected the world size {}", call.inputs[0].size(), c.size));
  }
  checks::dense(c, call.outputs);
  checks::dense(c, call.inputs[0]);
  checks::same_type_and_size(c, call.inputs[0], &call.outputs[0]);
  checks::device(c, call.outputs, engine.accepts_cuda(), engine.accepts_cpu());
  checks::device(c, call.inputs[0], engine.accepts_cuda(), engine.accepts_cpu());
  const ReduceOp op = call.options.reduce_op;
  checks::reduce_op(c, op, call.outputs[0].dtype(), false);
  engine.check_reduce(c, op, call.outputs[0].dtype(), false);
}

void check(const checks::Caller& c, const ReduceScatterTensorCall& call, const Engine& engine) {
  checks::dense(c, {call.output, call.input});
  checks::device(c, {call.output, call.input}, engine.accepts_cuda(), engine.accepts_cpu());
  if (call.output.dtype() != call.input.dtype()) {
    checks::fail(c, fmt::format("invalid tensor type: output is {}, input is {}", call.output.dtype(), call.input.dtype()));
  }
  if (call.input.numel() != call.output.numel() * c.size) {
    checks::fail(c, fmt::format("invalid tensor size: input has {} elements, expected {} (world size {} x output {})",
                                call.input.numel(), call.output.numel() * c.size, c.size, call.output.numel()));
  }
  const ReduceOp op = call.options.reduce_op;
  checks::reduce_op(c, op, call.output.dtype(), false);
  engine.check_reduce(c, op, call.output.dtype(), false);
}

void check(const checks::Caller& c, const AlltoallCall& call, const Engine& engine) {
  const auto n = static_cast<size_t>(c.size);
  if (call.inputs.size() != n) checks::fail(c, fmt::format("invalid input tensor list: {} tensors, expected {}", call.inputs.size(), n));
  if (call.outputs.size() != n) checks::fail(c, fmt::format("invalid output tensor list: {} tensors, expected {}", call.outputs.size(), n));
  checks::dense(c, call.inputs);
  checks::dense(c, call.outputs);
  checks::same_type(c, call.inputs);
  checks::same_type(c, call.outputs, &call.inputs[0]);
  checks::device(c, call.inputs, engine.accepts_cuda(), engine.accepts_cpu());
  checks::device(c, call.outputs, engine.accepts_cuda(), engine.accepts_cpu());
}

AlltoallCounts check(const checks::Caller& c, const AlltoallSingleCall& call, const Engine& engine) {
  checks::dense(c, {call.output, call.input});
  checks::device(c, {call.output, call.input}, engine.accepts_cuda(), engine.accepts_cpu());
  if (call.output.dtype() != call.input.dtype()) {
    checks::fail(c, fmt::format("invalid tensor type: output is {}, input is {}", call.output.dtype(), call.input.dtype()));
  }
  // Element counts per rank from split sizes along dim 0 (equal splits when the list is empty).
  auto counts_of = [&](const Tensor& t, const std::vector<int64_t>& splits, const char* which) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const int64_t row_numel = rows == 0 ? 0 : t.numel() / rows;
    std::vector<int64_t> counts;
    if (splits.empty()) {
      if (rows % c.size != 0) {
        checks::fail(c, fmt::format("invalid {} tensor size: dim 0 is {}, not divisible by the world size {}", which,
                                    rows, c.size));
      }
      counts.assign(static_cast<size_t>(c.size), rows / c.size * row_numel);
      return counts;
    }
    if (splits.size() != static_cast<size_t>(c.size)) {
      checks::fail(c, fmt::format("invalid {} split sizes: {} entries for world size {}", which, splits.size(), c.size));
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
  AlltoallCounts out;
  out.send_counts = counts_of(call.input, call.input_splits, "input");
  out.recv_counts = counts_of(call.output, call.output_splits, "output");
  out.send_offsets = offsets_of(out.send_counts);
  out.recv_offsets = offsets_of(out.recv_counts);
  return out;
}

void check_p2p(const checks::Caller& c, const TensorList& tensors, int peer, int tag, bool is_send, bool any_source,
               const Engine& engine) {
  if (tensors.size() != 1) checks::fail(c, fmt::format("requires a single-element tensor list, got {}", tensors.size()));
  checks::dense(c, tensors);
  checks::device(c, tensors, engine.accepts_cuda(), engine.accepts_cpu());
  // -1 means "any source" for recv_anysource only; send and recv name a real peer.
  if (!any_source) checks::dst_or_src_rank(c, peer, is_send ? "destination" : "source");
  if (peer == c.rank) checks::fail(c, fmt::format("invalid {} rank: {} is this rank", is_send ? "destination" : "source", peer));
  if (tag < 0) checks::fail(c, fmt::format("invalid tag: {} (tags are non-negative)", tag));
}

}  // namespace braid::collectives::call_checks
