#include "collectives/backends/non_member.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/check.h"

namespace braid::collectives {

NonMemberProcessGroup::NonMemberProcessGroup(std::string name, std::string backend, int global_rank,
                                             std::vector<int> members)
    : ProcessGroup(0, 1, std::move(name)),
      backend_(std::move(backend)),
      global_rank_(global_rank),
      members_(std::move(members)) {}

std::string NonMemberProcessGroup::not_a_member() const {
  return fmt::format("rank {} does not belong to group '{}' (members [{}])", global_rank_, name(),
                     fmt::join(members_, ", "));
}

void NonMemberProcessGroup::refuse(const char* op) const {
  BRAID_THROW(InvalidArgument, "{}: {}; only members may call collectives on it", op, not_a_member());
}

std::shared_ptr<Work> NonMemberProcessGroup::broadcast(TensorList&, const BroadcastOptions&) { refuse("broadcast"); }
std::shared_ptr<Work> NonMemberProcessGroup::allreduce(TensorList&, const AllreduceOptions&) { refuse("allreduce"); }
std::shared_ptr<Work> NonMemberProcessGroup::allreduce_coalesced(TensorList&, const AllreduceCoalescedOptions&) {
  refuse("allreduce_coalesced");
}
std::shared_ptr<Work> NonMemberProcessGroup::reduce(TensorList&, const ReduceOptions&) { refuse("reduce"); }
std::shared_ptr<Work> NonMemberProcessGroup::allgather(std::vector<TensorList>&, TensorList&, const AllgatherOptions&) {
  refuse("allgather");
}
std::shared_ptr<Work> NonMemberProcessGroup::allgather_into_tensor(Tensor&, Tensor&, const AllgatherOptions&) {
  refuse("allgather_into_tensor");
}
std::shared_ptr<Work> NonMemberProcessGroup::allgather_coalesced(std::vector<TensorList>&, TensorList&,
                                                                 const AllgatherOptions&) {
  refuse("allgather_coalesced");
}
std::shared_ptr<Work> NonMemberProcessGroup::gather(std::vector<TensorList>&, TensorList&, const GatherOptions&) {
  refuse("gather");
}
std::shared_ptr<Work> NonMemberProcessGroup::scatter(TensorList&, std::vector<TensorList>&, const ScatterOptions&) {
  refuse("scatter");
}
std::shared_ptr<Work> NonMemberProcessGroup::reduce_scatter(TensorList&, std::vector<TensorList>&,
                                                            const ReduceScatterOptions&) {
  refuse("reduce_scatter");
}
std::shared_ptr<Work> NonMemberProcessGroup::reduce_scatter_tensor(Tensor&, Tensor&, const ReduceScatterOptions&) {
  refuse("reduce_scatter_tensor");
}
std::shared_ptr<Work> NonMemberProcessGroup::alltoall(TensorList&, TensorList&, const AllToAllOptions&) {
  refuse("alltoall");
}
std::shared_ptr<Work> NonMemberProcessGroup::alltoall_single(Tensor&, Tensor&, const std::vector<int64_t>&,
                                                             const std::vector<int64_t>&, const AllToAllOptions&) {
  refuse("alltoall_single");
}
std::shared_ptr<Work> NonMemberProcessGroup::send(TensorList&, int, int) { refuse("send"); }
std::shared_ptr<Work> NonMemberProcessGroup::recv(TensorList&, int, int) { refuse("recv"); }
std::shared_ptr<Work> NonMemberProcessGroup::recv_anysource(TensorList&, int) { refuse("recv_anysource"); }
std::shared_ptr<Work> NonMemberProcessGroup::barrier(const BarrierOptions&) { refuse("barrier"); }
void NonMemberProcessGroup::monitored_barrier(std::optional<Millis>, bool) { refuse("monitored_barrier"); }

}  // namespace braid::collectives
