// ProcessGroup: braid's c10d interface. A group is a fixed set of ranks that run collectives together;
// every call is asynchronous and returns a Work at once. Every call goes through one virtual method,
// issue(Call&) (core/calls.h): EngineProcessGroup (queue/) runs it on engines, RoundRobinProcessGroup and
// NonMemberProcessGroup (registry/) pass it on or refuse it. DDP, FSDP and the runtime talk only to this
// interface.
//
// Contracts shared by every backend:
//   * Arguments are checked before any communication (collectives/core/checks.h); a bad call throws
//     InvalidArgument with torch's message substring ("invalid root rank", ...) plus op, group and rank, and
//     leaves the group usable.
//   * Ops on one group run in issue order; every rank must issue the same sequence. Posting never blocks.
//   * Each op gets the next sequence number of the group (equal across ranks for the same op).
//   * A failed or timed-out op poisons the group (errors are sticky): later calls throw CommError saying
//     which op failed first.
//   * Tensor lists follow torch: in-place on the inputs for broadcast/allreduce; see each method.
//
// Thread-safety: calls may come from several threads, but the order in which they are issued on each rank
// must be the same on every rank (as with torch).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "collectives/core/calls.h"
#include "collectives/core/options.h"
#include "collectives/core/work.h"

namespace braid::collectives {

class ProcessGroup {
 public:
  ProcessGroup(int rank, int size, std::string name);
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }
  virtual std::string backend_name() const = 0;
  // Sequence number of the last op issued on this group (0 before the first).
  uint64_t sequence_number() const { return seq_.load(); }
  Millis timeout() const { return timeout_.load(); }
  void set_timeout(Millis timeout) { timeout_.store(timeout); }

  // Every op below wraps its arguments in a Call and issues it here: the one method a group implements.
  virtual std::shared_ptr<Work> issue(Call& call) = 0;

  // The root's `root_tensor` is copied into every tensor of every rank.
  std::shared_ptr<Work> broadcast(TensorList& tensors, const BroadcastOptions& options = {});
  // Reduces over all tensors of all ranks; every tensor receives the result. Sparse COO tensors
  // (Tensor::is_sparse) are summed (SUM only) and the result replaces the list entries.
  std::shared_ptr<Work> allreduce(TensorList& tensors, const AllreduceOptions& options = {});
  // Each list position is reduced separately across ranks (one fused operation).
  std::shared_ptr<Work> allreduce_coalesced(TensorList& tensors, const AllreduceCoalescedOptions& options = {});
  // Like allreduce, but only the root's tensor is defined afterwards.
  std::shared_ptr<Work> reduce(TensorList& tensors, const ReduceOptions& options = {});
  // outputs[i] (size ws * n) receives every rank's n inputs, rank-major.
  std::shared_ptr<Work> allgather(std::vector<TensorList>& outputs, TensorList& inputs,
                                  const AllgatherOptions& options = {});
  // output = cat(inputs of every rank) along dim 0.
  std::shared_ptr<Work> allgather_into_tensor(Tensor& output, Tensor& input, const AllgatherOptions& options = {});
  // outputs[r] is rank r's list of inputs.
  std::shared_ptr<Work> allgather_coalesced(std::vector<TensorList>& outputs, TensorList& inputs,
                                            const AllgatherOptions& options = {});
  // outputs[i] = cat(inputs[i] of every rank) along dim 0, for every i, as one operation (torch's
  // allgather_into_tensor_coalesced): one dtype and device across the lists.
  std::shared_ptr<Work> allgather_into_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                        const AllgatherOptions& options = {});
  // The root's outputs[0] (ws tensors) receives every rank's single input; non-roots pass no outputs.
  std::shared_ptr<Work> gather(std::vector<TensorList>& outputs, TensorList& inputs, const GatherOptions& options = {});
  // Every rank's single output receives the root's inputs[0][rank]; non-roots pass no inputs.
  std::shared_ptr<Work> scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                const ScatterOptions& options = {});
  // outputs[0] receives the reduction over ranks of inputs[0][rank].
  std::shared_ptr<Work> reduce_scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                       const ReduceScatterOptions& options = {});
  // output receives chunk `rank` (along dim 0) of the reduction of every rank's input.
  std::shared_ptr<Work> reduce_scatter_tensor(Tensor& output, Tensor& input, const ReduceScatterOptions& options = {});
  // outputs[i] receives chunk `rank` of the reduction of every rank's inputs[i], for every i, as one
  // operation (torch's reduce_scatter_tensor_coalesced).
  std::shared_ptr<Work> reduce_scatter_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                        const ReduceScatterOptions& options = {});
  // outputs[r] receives rank r's inputs[this rank].
  std::shared_ptr<Work> alltoall(TensorList& outputs, TensorList& inputs, const AllToAllOptions& options = {});
  // Splits along dim 0 (equal when the split lists are empty).
  std::shared_ptr<Work> alltoall_single(Tensor& output, Tensor& input, const std::vector<int64_t>& output_splits,
                                        const std::vector<int64_t>& input_splits, const AllToAllOptions& options = {});
  std::shared_ptr<Work> send(TensorList& tensors, int dst_rank, int tag);
  std::shared_ptr<Work> recv(TensorList& tensors, int src_rank, int tag);
  std::shared_ptr<Work> recv_anysource(TensorList& tensors, int tag);
  // Completes after every earlier op on this group has completed, on every rank.
  std::shared_ptr<Work> barrier(const BarrierOptions& options = {});

  // A contiguous tensor (uninitialised) on `device` for buffers that this group reduces often, such as
  // DDP's buckets. On the CPU, engines for CPU tensors allocate it in memory every rank on the host maps
  // (EngineProcessGroup: the shared-memory engine's pool set up on the first CPU call, which is collective — every
  // rank of the group makes its first call at the same point of its sequence of ops); an allreduce whose
  // buffers on every rank come from there reduces in place through that memory instead of through the
  // engine's copies. Other devices, and by default: ordinary memory.
  virtual Tensor empty_shared(const Shape& shape, DType dtype, Device device = Device::cpu());

  // Blocks until every rank arrived or `timeout` passed, then names the ranks that did not arrive
  // (see queue/monitored_barrier.h). Groups without a store throw InvalidArgument.
  virtual void monitored_barrier(std::optional<Millis> timeout = std::nullopt, bool wait_all_ranks = false);

  // "allreduce #12 on group 'world' (rank 1/4, gloo)" — used in Work names and errors.
  std::string describe_op(const std::string& op, uint64_t seq) const;

 protected:
  // Takes the next sequence number; backends call it once per issued op.
  uint64_t next_sequence_number() { return seq_.fetch_add(1) + 1; }
  Millis timeout_for(const std::optional<Millis>& t) const { return t.value_or(timeout()); }

 private:
  int rank_;
  int size_;
  std::string name_;
  std::atomic<uint64_t> seq_{0};
  std::atomic<Millis> timeout_{kDefaultCollectiveTimeout};
};

}  // namespace braid::collectives
