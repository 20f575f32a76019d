// RoundRobinProcessGroup: several groups over the same ranks used as one (torch's
// _round_robin_process_groups). Successive collectives go to the groups in rotation, so independent
// collectives can run on separate engines/connections at once (SPEC B.9).
//
// Every rank issues the same sequence of calls, so call n goes to group n % k on every rank and the
// groups see matching sequences. The pick and the issue happen under one lock, so calls from several
// threads reach each member group in the order in which they took their turn.
//
// Two kinds of calls are not rotated:
//   * barrier() runs a barrier on every member group and completes when all of them have, so "barrier
//     implies wait" (SPEC B.2) holds over all earlier calls, whichever group they went to;
//   * monitored_barrier() runs on every member group in turn (it blocks, as torch's does);
//   * send/recv/recv_anysource always use the first group: the sender and the receiver issue different
//     numbers of calls, so a rotation would pair a send with a recv on another group.
//
// The round-robin group owns shared references to its groups; it starts no threads, so creating and
// dropping it leaks nothing (the groups shut down when their last owner lets go).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/process_group.h"

namespace braid::collectives {

class RoundRobinProcessGroup final : public ProcessGroup {
 public:
  // `groups` must be non-empty and all have this rank's rank and the same size. `name` defaults to
  // "round_robin(<name 1>,<name 2>,...)".
  explicit RoundRobinProcessGroup(std::vector<std::shared_ptr<ProcessGroup>> groups, std::string name = "");

  std::string backend_name() const override { return "round_robin"; }
  const std::vector<std::shared_ptr<ProcessGroup>>& groups() const { return groups_; }

  std::shared_ptr<Work> broadcast(TensorList& tensors, const BroadcastOptions& options = {}) override;
  std::shared_ptr<Work> allreduce(TensorList& tensors, const AllreduceOptions& options = {}) override;
  std::shared_ptr<Work> allreduce_coalesced(TensorList& tensors, const AllreduceCoalescedOptions& options = {}) override;
  std::shared_ptr<Work> reduce(TensorList& tensors, const ReduceOptions& options = {}) override;
  std::shared_ptr<Work> allgather(std::vector<TensorList>& outputs, TensorList& inputs,
                                  const AllgatherOptions& options = {}) override;
  std::shared_ptr<Work> allgather_into_tensor(Tensor& output, Tensor& input, const AllgatherOptions& options = {}) override;
  std::shared_ptr<Work> allgather_coalesced(std::vector<TensorList>& outputs, TensorList& inputs,
                                            const AllgatherOptions& options = {}) override;
  std::shared_ptr<Work> gather(std::vector<TensorList>& outputs, TensorList& inputs,
                               const GatherOptions& options = {}) override;
  std::shared_ptr<Work> scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                const ScatterOptions& options = {}) override;
  std::shared_ptr<Work> reduce_scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                       const ReduceScatterOptions& options = {}) override;
  std::shared_ptr<Work> reduce_scatter_tensor(Tensor& output, Tensor& input,
                                              const ReduceScatterOptions& options = {}) override;
  std::shared_ptr<Work> alltoall(TensorList& outputs, TensorList& inputs, const AllToAllOptions& options = {}) override;
  std::shared_ptr<Work> alltoall_single(Tensor& output, Tensor& input, const std::vector<int64_t>& output_splits,
                                        const std::vector<int64_t>& input_splits,
                                        const AllToAllOptions& options = {}) override;
  std::shared_ptr<Work> send(TensorList& tensors, int dst_rank, int tag) override;
  std::shared_ptr<Work> recv(TensorList& tensors, int src_rank, int tag) override;
  std::shared_ptr<Work> recv_anysource(TensorList& tensors, int tag) override;
  std::shared_ptr<Work> barrier(const BarrierOptions& options = {}) override;
  void monitored_barrier(std::optional<Millis> timeout = std::nullopt, bool wait_all_ranks = false) override;

 private:
  // Runs `issue` on the next group in rotation (under the lock) and counts the op.
  template <class F>
  std::shared_ptr<Work> rotate(F&& issue);
  template <class F>
  std::shared_ptr<Work> on_first(F&& issue);

  std::vector<std::shared_ptr<ProcessGroup>> groups_;
  std::mutex mu_;
  size_t next_ = 0;  // guarded by mu_
};

}  // namespace braid::collectives
