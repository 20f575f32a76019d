// The module-level collectives of the group registry (group_registry.h): torch.distributed's function API
// over the default group or a given one.
#include <fmt/format.h>

#include "base/check.h"
#include "collectives/registry/group_registry.h"

namespace braid::collectives {

namespace {

std::shared_ptr<Work> finish(std::shared_ptr<Work> work, bool async_op) {
  if (!async_op) work->wait();
  return work;
}

}  // namespace

std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op, const GroupArg& group, bool async_op) {
  GroupPtr pg = group_for_op(group, "all_reduce");
  if (!pg) return nullptr;
  TensorList tensors{tensor};
  AllreduceOptions o;
  o.reduce_op = op;
  return finish(pg->allreduce(tensors, o), async_op);
}

std::shared_ptr<Work> all_gather(const std::vector<Tensor>& tensor_list, const Tensor& tensor, const GroupArg& group,
                                 bool async_op) {
  GroupPtr pg = group_for_op(group, "all_gather");
  if (!pg) return nullptr;
  // torch's _ensure_all_tensors_same_dtype, checked here because the group sees only its own dtypes.
  for (const auto& t : tensor_list) {
    BRAID_CHECK_ARG(!t.defined() || !tensor.defined() || t.dtype() == tensor.dtype(),
                    "all_gather on group '{}': Invalid usage of tensors with different dtypes: found {} and {}",
                    pg->name(), dtype_name(tensor.dtype()), dtype_name(t.dtype()));
  }
  std::vector<TensorList> outputs{tensor_list};
  TensorList inputs{tensor};
  return finish(pg->allgather(outputs, inputs), async_op);
}

std::shared_ptr<Work> broadcast(const Tensor& tensor, int src, const GroupArg& group, bool async_op) {
  GroupPtr pg = group_for_op(group, "broadcast");
  if (!pg) return nullptr;
  BroadcastOptions o;
  o.root_rank = group ? get_group_rank(pg, src) : src;
  TensorList tensors{tensor};
  return finish(pg->broadcast(tensors, o), async_op);
}

std::shared_ptr<Work> barrier(const GroupArg& group, bool async_op) {
  GroupPtr pg = group_for_op(group, "barrier");
  if (!pg) return nullptr;
  return finish(pg->barrier(), async_op);
}

}  // namespace braid::collectives
