#include "collectives/registry/non_member.h"

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

std::shared_ptr<Work> NonMemberProcessGroup::issue(Call& call) { refuse(std::string(call_name(call)).c_str()); }
void NonMemberProcessGroup::monitored_barrier(std::optional<Millis>, bool) { refuse("monitored_barrier"); }

}  // namespace braid::collectives
