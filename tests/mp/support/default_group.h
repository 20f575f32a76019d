// init_process_group over the test case's store for the length of a scope (new_group and DDP's default
// group need it), destroyed when the scope ends. The backend is the suite's, except that nccl cases run
// their CPU-side groups on gloo.
#pragma once

#include "collectives/registry/group_registry.h"
#include "tests/mp/support/mp_fixture.h"

namespace braid::mp {

class DefaultGroupScope {
 public:
  explicit DefaultGroupScope(MpFixture& f) {
    collectives::InitOptions o;
    o.store = f.store();
    o.rank = f.rank();
    o.world_size = f.size();
    o.group.timeout = kTestGroupTimeout;
    collectives::init_process_group(f.backend() == "nccl" ? "gloo" : f.backend(), o);
  }
  ~DefaultGroupScope() {
    if (collectives::is_initialized()) collectives::destroy_process_group();
  }
  DefaultGroupScope(const DefaultGroupScope&) = delete;
  DefaultGroupScope& operator=(const DefaultGroupScope&) = delete;
};

}  // namespace braid::mp
