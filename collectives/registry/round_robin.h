// RoundRobinProcessGroup: several groups over the same ranks used as one (torch's
// _round_robin_process_groups). Successive collectives go to the groups in rotation, so independent
// collectives can run on separate engines/connections at once.
//
// Every rank issues the same sequence of calls, so call n goes to group n % k on every rank and the
// groups see matching sequences. The pick and the issue happen under one lock, so calls from several
// threads reach each member group in the order in which they took their turn.
//
// Two kinds of calls are not rotated:
//   * barrier() runs a barrier on every member group and completes when all of them have, so "barrier
//     implies wait" holds over all earlier calls, whichever group they went to;
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

#include "collectives/core/process_group.h"

namespace braid::collectives {

class RoundRobinProcessGroup final : public ProcessGroup {
 public:
  // `groups` must be non-empty and all have this rank's rank and the same size. `name` defaults to
  // "round_robin(<name 1>,<name 2>,...)".
  explicit RoundRobinProcessGroup(std::vector<std::shared_ptr<ProcessGroup>> groups, std::string name = "");

  std::string backend_name() const override { return "round_robin"; }
  const std::vector<std::shared_ptr<ProcessGroup>>& groups() const { return groups_; }

  std::shared_ptr<Work> issue(Call& call) override;
  void monitored_barrier(std::optional<Millis> timeout = std::nullopt, bool wait_all_ranks = false) override;

 private:
  // A barrier on every member group, complete when all of them are.
  std::shared_ptr<Work> barrier_all(const BarrierOptions& options);

  std::vector<std::shared_ptr<ProcessGroup>> groups_;
  std::mutex mu_;
  size_t next_ = 0;  // guarded by mu_
};

}  // namespace braid::collectives
