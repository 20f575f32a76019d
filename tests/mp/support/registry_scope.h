// The group registry (collectives/registry/group_registry.h) for one test case: init_process_group on the
// case's private store, destroy_process_group when the case ends.
#pragma once

#include "collectives/registry/group_registry.h"
#include "tests/mp/support/mp_fixture.h"

namespace braid::mp {

struct Registry {
  explicit Registry(MpFixture& f, Millis timeout = kTestGroupTimeout) {
    collectives::InitOptions o;
    o.store = f.store();
    o.rank = f.rank();
    o.world_size = f.size();
    o.group.timeout = timeout;
    collectives::init_process_group(f.backend(), o);
  }
  ~Registry() {
    if (collectives::is_initialized()) collectives::destroy_process_group();
  }
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
};

}  // namespace braid::mp
