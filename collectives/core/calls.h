// One struct per ProcessGroup call, holding the caller's arguments by reference, and `Call`, the variant of
// them all. ProcessGroup's public methods each wrap their arguments in one of these and hand it to the
// group's single virtual entry, issue(); so the list of collectives is written once (here), and a group
// that treats every call alike (a non-member's refusal, round robin's rotation) needs no method per op.
//
// The references are valid only during issue(): whoever keeps a tensor list for later copies it.
#pragma once

#include <cstdint>
#include <string_view>
#include <variant>
#include <vector>

#include "collectives/core/options.h"
#include "collectives/core/work.h"

namespace braid::collectives {

struct BroadcastCall {
  static constexpr std::string_view kName = "broadcast";
  TensorList& tensors;
  const BroadcastOptions& options;
};
struct AllreduceCall {
  static constexpr std::string_view kName = "allreduce";
  TensorList& tensors;
  const AllreduceOptions& options;
};
struct AllreduceCoalescedCall {
  static constexpr std::string_view kName = "allreduce_coalesced";
  TensorList& tensors;
  const AllreduceCoalescedOptions& options;
};
struct ReduceCall {
  static constexpr std::string_view kName = "reduce";
  TensorList& tensors;
  const ReduceOptions& options;
};
struct AllgatherCall {
  static constexpr std::string_view kName = "allgather";
  std::vector<TensorList>& outputs;
  TensorList& inputs;
  const AllgatherOptions& options;
};
struct AllgatherIntoTensorCall {
  static constexpr std::string_view kName = "allgather_into_tensor";
  Tensor& output;
  Tensor& input;
  const AllgatherOptions& options;
};
struct AllgatherCoalescedCall {
  static constexpr std::string_view kName = "allgather_coalesced";
  std::vector<TensorList>& outputs;
  TensorList& inputs;
  const AllgatherOptions& options;
};
// outputs[i] = cat over ranks of inputs[i], one fused operation over every pair.
struct AllgatherIntoTensorCoalescedCall {
  static constexpr std::string_view kName = "allgather_into_tensor_coalesced";
  TensorList& outputs;
  TensorList& inputs;
  const AllgatherOptions& options;
};
struct GatherCall {
  static constexpr std::string_view kName = "gather";
  std::vector<TensorList>& outputs;
  TensorList& inputs;
  const GatherOptions& options;
};
struct ScatterCall {
  static constexpr std::string_view kName = "scatter";
  TensorList& outputs;
  std::vector<TensorList>& inputs;
  const ScatterOptions& options;
};
struct ReduceScatterCall {
  static constexpr std::string_view kName = "reduce_scatter";
  TensorList& outputs;
  std::vector<TensorList>& inputs;
  const ReduceScatterOptions& options;
};
struct ReduceScatterTensorCall {
  static constexpr std::string_view kName = "reduce_scatter_tensor";
  Tensor& output;
  Tensor& input;
  const ReduceScatterOptions& options;
};
// outputs[i] = chunk `rank` of the reduction of every rank's inputs[i], one fused operation.
struct ReduceScatterTensorCoalescedCall {
  static constexpr std::string_view kName = "reduce_scatter_tensor_coalesced";
  TensorList& outputs;
  TensorList& inputs;
  const ReduceScatterOptions& options;
};
struct AlltoallCall {
  static constexpr std::string_view kName = "alltoall";
  TensorList& outputs;
  TensorList& inputs;
  const AllToAllOptions& options;
};
struct AlltoallSingleCall {
  static constexpr std::string_view kName = "alltoall_single";
  Tensor& output;
  Tensor& input;
  const std::vector<int64_t>& output_splits;
  const std::vector<int64_t>& input_splits;
  const AllToAllOptions& options;
};
struct SendCall {
  static constexpr std::string_view kName = "send";
  TensorList& tensors;
  int dst_rank;
  int tag;
};
struct RecvCall {
  static constexpr std::string_view kName = "recv";
  TensorList& tensors;
  int src_rank;  // -1: any source (recv_anysource)
  int tag;
  bool any_source() const { return src_rank == -1; }
};
struct BarrierCall {
  static constexpr std::string_view kName = "barrier";
  const BarrierOptions& options;
};

using Call = std::variant<BroadcastCall, AllreduceCall, AllreduceCoalescedCall, ReduceCall, AllgatherCall,
                          AllgatherIntoTensorCall, AllgatherCoalescedCall, AllgatherIntoTensorCoalescedCall, GatherCall,
                          ScatterCall, ReduceScatterCall, ReduceScatterTensorCall, ReduceScatterTensorCoalescedCall,
                          AlltoallCall, AlltoallSingleCall, SendCall, RecvCall, BarrierCall>;

// "allreduce", "recv_anysource", ...: the public method the call came from.
inline std::string_view call_name(const Call& call) {
  if (const auto* r = std::get_if<RecvCall>(&call); r != nullptr && r->any_source()) return "recv_anysource";
  return std::visit([](const auto& c) { return std::decay_t<decltype(c)>::kName; }, call);
}

// Point-to-point calls: the sender and receiver issue different numbers of them, so they take no part in
// the group's collective sequence.
inline bool is_point_to_point(const Call& call) {
  return std::holds_alternative<SendCall>(call) || std::holds_alternative<RecvCall>(call);
}

}  // namespace braid::collectives
