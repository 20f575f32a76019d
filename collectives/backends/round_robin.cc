#include "collectives/backends/round_robin.h"

#include <fmt/format.h>


#include "base/check.h"

namespace braid::collectives {
namespace {

std::string default_name(const std::vector<std::shared_ptr<ProcessGroup>>& groups) {
  std::string names;
  for (const auto& g : groups) {
    if (!names.empty()) names += ",";
    names += g ? g->name() : "null";
  }
  return "round_robin(" + names + ")";
}

// The first group's rank and size, after checking that every group agrees on them.
const ProcessGroup& checked_first(const std::vector<std::shared_ptr<ProcessGroup>>& groups) {
  BRAID_CHECK_ARG(!groups.empty(), "RoundRobinProcessGroup: needs at least one process group");
  for (size_t i = 0; i < groups.size(); ++i) {
    BRAID_CHECK_ARG(groups[i] != nullptr, "RoundRobinProcessGroup: process group {} is null", i);
    BRAID_CHECK_ARG(groups[i]->rank() == groups[0]->rank() && groups[i]->size() == groups[0]->size(),
                    "RoundRobinProcessGroup: every group must have the same rank and size; group {} '{}' has rank "
                    "{}/{} but group 0 '{}' has rank {}/{}",
                    i, groups[i]->name(), groups[i]->rank(), groups[i]->size(), groups[0]->name(),
                    groups[0]->rank(), groups[0]->size());
  }
  return *groups[0];
}

}  // namespace

RoundRobinProcessGroup::RoundRobinProcessGroup(std::vector<std::shared_ptr<ProcessGroup>> groups, std::string name)
    // Each argument checks on its own: their evaluation order is unspecified.
    : ProcessGroup(checked_first(groups).rank(), checked_first(groups).size(),
                   name.empty() ? default_name(groups) : std::move(name)),
      groups_(std::move(groups)) {
  set_timeout(groups_[0]->timeout());
}

template <class F>
std::shared_ptr<Work> RoundRobinProcessGroup::rotate(F&& issue) {
  std::lock_guard<std::mutex> lock(mu_);
  ProcessGroup& group = *groups_[next_ % groups_.size()];
  // Advance and count only once the call was accepted: a call refused by the argument checks
  // communicates nothing, so it must not shift the rotation on this rank alone.
  auto work = issue(group);
  ++next_;
  next_sequence_number();
  return work;
}

template <class F>
std::shared_ptr<Work> RoundRobinProcessGroup::on_first(F&& issue) {
  std::lock_guard<std::mutex> lock(mu_);
  auto work = issue(*groups_[0]);
  next_sequence_number();
  return work;
}

std::shared_ptr<Work> RoundRobinProcessGroup::broadcast(TensorList& tensors, const BroadcastOptions& options) {
  return rotate([&](ProcessGroup& g) { return g.broadcast(tensors, options); });
}
std::shared_ptr<Work> RoundRobinProcessGroup::allreduce(TensorList& tensors, const AllreduceOptions& options) {
  return rotate([&](ProcessGroup& g) { return g.allreduce(tensors, options); });
}
std::shared_ptr<Work> RoundRobinProcessGroup::allreduce_coalesced(TensorList& tensors,
                                                                  const AllreduceCoalescedOptions& options) {
  return rotate([&](ProcessGroup& g) { return g.allreduce_coalesced(tensors, options); });
}
std::shared_ptr<Work> RoundRobinProcessGroup::reduce(TensorList& tensors, const ReduceOptions& options) {
  return rotate([&](ProcessGroup& g) { return g.reduce(tensors, options); });
}
std::shared_ptr<Work> RoundRobinProcessGroup::allgather(std::vector<TensorList>& outputs, TensorList& inputs,
                                                        const AllgatherOptions& options) {
  return rotate([&](ProcessGroup& g) { return g.allgather(outputs, inputs, options); });
}
std::shared_ptr<Work> RoundRobinProcessGroup::allgather_into_tensor(Tensor& output, Tensor& input,
                                                                    const AllgatherOptions& options) {
  return rotate([&](ProcessGroup& g) { return g.allgather_into_tensor(output, input, options); });
}
std::shared_ptr<Work> RoundRobinProcessGroup::allgather_coalesced(std::vector<TensorList>& outputs, TensorList& inputs,
                                                                  const AllgatherOptions& options) {
  return rotate([&](ProcessGroup& g) { return g.allgather_coalesced(outputs, inputs, options); });
}
std::shared_ptr<Work> RoundRobinProcessGroup::gather(std::vector<TensorList>& outputs, TensorList& inputs,
                                                     const GatherOptions& options) {
  return rotate([&](ProcessGroup& g) { return g.gather(outputs, inputs, options); });
}
std::shared_ptr<Work> RoundRobinProcessGroup::scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                                      const ScatterOptions& options) {
  return rotate([&](ProcessGroup& g) { return g.scatter(outputs, inputs, options); });
}
std::shared_ptr<Work> RoundRobinProcessGroup::reduce_scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                                             const ReduceScatterOptions& options) {
  return rotate([&](ProcessGroup& g) { return g.reduce_scatter(outputs, inputs, options); });
}
std::shared_ptr<Work> RoundRobinProcessGroup::reduce_scatter_tensor(Tensor& output, Tensor& input,
                                                                    const ReduceScatterOptions& options) {
  return rotate([&](ProcessGroup& g) { return g.reduce_scatter_tensor(output, input, options); });
}
std::shared_ptr<Work> RoundRobinProcessGroup::alltoall(TensorList& outputs, TensorList& inputs,
                                                       const AllToAllOptions& options) {
  return rotate([&](ProcessGroup& g) { return g.alltoall(outputs, inputs, options); });
}
std::shared_ptr<Work> RoundRobinProcessGroup::alltoall_single(Tensor& output, Tensor& input,
                                                              const std::vector<int64_t>& output_splits,
                                                              const std::vector<int64_t>& input_splits,
                                                              const AllToAllOptions& options) {
  return rotate([&](ProcessGroup& g) { return g.alltoall_single(output, input, output_splits, input_splits, options); });
}
std::shared_ptr<Work> RoundRobinProcessGroup::send(TensorList& tensors, int dst_rank, int tag) {
  return on_first([&](ProcessGroup& g) { return g.send(tensors, dst_rank, tag); });
}
std::shared_ptr<Work> RoundRobinProcessGroup::recv(TensorList& tensors, int src_rank, int tag) {
  return on_first([&](ProcessGroup& g) { return g.recv(tensors, src_rank, tag); });
}
std::shared_ptr<Work> RoundRobinProcessGroup::recv_anysource(TensorList& tensors, int tag) {
  return on_first([&](ProcessGroup& g) { return g.recv_anysource(tensors, tag); });
}

void RoundRobinProcessGroup::monitored_barrier(std::optional<Millis> timeout, bool wait_all_ranks) {
  // Not under the lock: it blocks until every rank arrives, and other threads may keep issuing.
  for (auto& g : groups_) g->monitored_barrier(timeout, wait_all_ranks);
}

std::shared_ptr<Work> RoundRobinProcessGroup::barrier(const BarrierOptions& options) {
  std::vector<std::shared_ptr<Work>> parts;
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    parts.reserve(groups_.size());
    for (auto& g : groups_) parts.push_back(g->barrier(options));
    seq = next_sequence_number();
  }
  auto work = std::make_shared<Work>(describe_op("barrier", seq), timeout_for(options.timeout));
  // One countdown over the member barriers; the combined Work fails with the first error seen.
  struct Join {
    std::mutex mu;
    size_t left;
    std::exception_ptr error;
  };
  auto join = std::make_shared<Join>();
  join->left = parts.size();
  for (auto& part : parts) {
    part->get_future().add_callback([join, work](const Future<TensorList>& f) {
      bool last = false;
      std::exception_ptr error;
      {
        std::lock_guard<std::mutex> lock(join->mu);
        if (!join->error && f.error()) join->error = f.error();
        last = --join->left == 0;
        error = join->error;
      }
      if (!last) return;
      if (error) {
        work->finish_with_error(error);
      } else {
        work->finish({});
      }
    });
  }
  return work;
}

}  // namespace braid::collectives
