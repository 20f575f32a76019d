#include "collectives/core/process_group.h"

#include <fmt/format.h>

#include <string>

#include "base/check.h"
#include "base/fault_injection.h"

namespace braid::collectives {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op.kind) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::AVG: return "AVG";
    case ReduceOp::PRODUCT: return "PRODUCT";
    case ReduceOp::MIN: return "MIN";
    case ReduceOp::MAX: return "MAX";
    case ReduceOp::BAND: return "BAND";
    case ReduceOp::BOR: return "BOR";
    case ReduceOp::BXOR: return "BXOR";
    case ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
  }
  return "UNKNOWN";
}

ProcessGroup::ProcessGroup(int rank, int size, std::string name) : rank_(rank), size_(size), name_(std::move(name)) {
  BRAID_CHECK_ARG(size > 0, "ProcessGroup '{}': size must be positive, got {}", name_, size);
  BRAID_CHECK_ARG(rank >= 0 && rank < size, "ProcessGroup '{}': rank {} is out of range for size {}", name_, rank,
                  size);
}

std::shared_ptr<Work> ProcessGroup::broadcast(TensorList& tensors, const BroadcastOptions& options) {
  Call call = BroadcastCall{tensors, options};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::allreduce(TensorList& tensors, const AllreduceOptions& options) {
  fault::point("allreduce");  // BRAID_FAULT (base/fault_injection.h)
  Call call = AllreduceCall{tensors, options};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::allreduce_coalesced(TensorList& tensors, const AllreduceCoalescedOptions& options) {
  Call call = AllreduceCoalescedCall{tensors, options};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::reduce(TensorList& tensors, const ReduceOptions& options) {
  Call call = ReduceCall{tensors, options};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::allgather(std::vector<TensorList>& outputs, TensorList& inputs,
                                              const AllgatherOptions& options) {
  Call call = AllgatherCall{outputs, inputs, options};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::allgather_into_tensor(Tensor& output, Tensor& input, const AllgatherOptions& options) {
  Call call = AllgatherIntoTensorCall{output, input, options};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::allgather_coalesced(std::vector<TensorList>& outputs, TensorList& inputs,
                                                        const AllgatherOptions& options) {
  Call call = AllgatherCoalescedCall{outputs, inputs, options};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::allgather_into_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                                    const AllgatherOptions& options) {
  Call call = AllgatherIntoTensorCoalescedCall{outputs, inputs, options};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::reduce_scatter_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                                    const ReduceScatterOptions& options) {
  Call call = ReduceScatterTensorCoalescedCall{outputs, inputs, options};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::gather(std::vector<TensorList>& outputs, TensorList& inputs,
                                           const GatherOptions& options) {
  Call call = GatherCall{outputs, inputs, options};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                            const ScatterOptions& options) {
  Call call = ScatterCall{outputs, inputs, options};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::reduce_scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                                   const ReduceScatterOptions& options) {
  Call call = ReduceScatterCall{outputs, inputs, options};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::reduce_scatter_tensor(Tensor& output, Tensor& input,
                                                          const ReduceScatterOptions& options) {
  Call call = ReduceScatterTensorCall{output, input, options};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::alltoall(TensorList& outputs, TensorList& inputs, const AllToAllOptions& options) {
  Call call = AlltoallCall{outputs, inputs, options};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::alltoall_single(Tensor& output, Tensor& input,
                                                    const std::vector<int64_t>& output_splits,
                                                    const std::vector<int64_t>& input_splits,
                                                    const AllToAllOptions& options) {
  Call call = AlltoallSingleCall{output, input, output_splits, input_splits, options};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::send(TensorList& tensors, int dst_rank, int tag) {
  Call call = SendCall{tensors, dst_rank, tag};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::recv(TensorList& tensors, int src_rank, int tag) {
  Call call = RecvCall{tensors, src_rank, tag};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::recv_anysource(TensorList& tensors, int tag) {
  Call call = RecvCall{tensors, -1, tag};
  return issue(call);
}
std::shared_ptr<Work> ProcessGroup::barrier(const BarrierOptions& options) {
  Call call = BarrierCall{options};
  return issue(call);
}

Tensor ProcessGroup::empty_shared(const Shape& shape, DType dtype, Device device) {
  return Tensor::empty(shape, TensorOptions(dtype, device));
}

std::string ProcessGroup::describe_op(const std::string& op, uint64_t seq) const {
  // Every op builds this text: appending to one reserved string skips fmt's parse of the pattern, which
  // showed in profiles of 4 KiB ops.
  const std::string backend = backend_name();
  std::string out;
  out.reserve(op.size() + name_.size() + backend.size() + 64);
  out += op;
  out += " #";
  out += std::to_string(seq);
  out += " on group '";
  out += name_;
  out += "' (rank ";
  out += std::to_string(rank_);
  out += '/';
  out += std::to_string(size_);
  out += ", ";
  out += backend;
  out += ')';
  return out;
}

void ProcessGroup::monitored_barrier(std::optional<Millis> /*timeout*/, bool /*wait_all_ranks*/) {
  BRAID_THROW(InvalidArgument, "monitored_barrier on group '{}' (rank {}/{}): not supported by the {} backend",
              name_, rank_, size_, backend_name());
}

}  // namespace braid::collectives
