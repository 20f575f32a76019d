#include "collectives/registry/round_robin.h"

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

std::shared_ptr<Work> RoundRobinProcessGroup::issue(Call& call) {
  if (auto* b = std::get_if<BarrierCall>(&call)) return barrier_all(b->options);
  std::lock_guard<std::mutex> lock(mu_);
  if (is_point_to_point(call)) {
    auto work = groups_[0]->issue(call);
    next_sequence_number();
    return work;
  }
  ProcessGroup& group = *groups_[next_ % groups_.size()];
  // Advance and count only once the call was accepted: a call refused by the argument checks
  // communicates nothing, so it must not shift the rotation on this rank alone.
  auto work = group.issue(call);
  ++next_;
  next_sequence_number();
  return work;
}

void RoundRobinProcessGroup::monitored_barrier(std::optional<Millis> timeout, bool wait_all_ranks) {
  // Not under the lock: it blocks until every rank arrives, and other threads may keep issuing.
  for (auto& g : groups_) g->monitored_barrier(timeout, wait_all_ranks);
}

std::shared_ptr<Work> RoundRobinProcessGroup::barrier_all(const BarrierOptions& options) {
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
