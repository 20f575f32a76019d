// NonMemberProcessGroup: what new_group() returns on a rank that is not in the group (torch's
// GroupMember.NON_GROUP_MEMBER, but carrying the group's name and members so that errors can say which
// group was meant). new_group is collective over the default group, so every rank gets a handle, and the
// ranks outside the group need one they can hold, compare and pass to get_process_group_ranks.
//
// Calling a collective on it directly throws InvalidArgument "<op>: rank R does not belong to group
// 'NAME' (members [...])"; the module-level functions in group_registry.h instead warn once per op and skip the
// call, as torch's do. rank() and size() of the ProcessGroup are placeholders (0 and 1, as ProcessGroup requires a
// valid rank); use get_rank(group) / get_world_size(group), which return -1 for a non-member.
//
// Thread-safety: immutable after construction.
#pragma once

#include <string>
#include <vector>

#include "collectives/core/process_group.h"

namespace braid::collectives {

class NonMemberProcessGroup final : public ProcessGroup {
 public:
  // `global_rank`: the caller's rank in the default group; `members`: the group's global ranks, sorted.
  NonMemberProcessGroup(std::string name, std::string backend, int global_rank, std::vector<int> members);

  std::string backend_name() const override { return backend_; }
  int global_rank() const { return global_rank_; }
  const std::vector<int>& members() const { return members_; }

  std::shared_ptr<Work> issue(Call& call) override;
  void monitored_barrier(std::optional<Millis> timeout = std::nullopt, bool wait_all_ranks = false) override;

  // "rank 3 does not belong to group 'group-2' (members [0, 2])", the text every refusal carries.
  std::string not_a_member() const;

 private:
  [[noreturn]] void refuse(const char* op) const;

  std::string backend_;
  int global_rank_;
  std::vector<int> members_;
};

}  // namespace braid::collectives
