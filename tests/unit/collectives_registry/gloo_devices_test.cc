// gloo's TCP devices (collectives/gloo/gloo_devices.h): the event-loop thread each device starts runs
// under SCHED_BATCH, so that its wake-ups never preempt the worker whose pair lock it then spins on
// (collectives/gloo/README.md, "Choices"); BRAID_GLOO_LOOP_BATCH=0 leaves it at the creating thread's
// policy. The loop thread is found as the thread that appears when the device is made.
#include <catch2/catch.hpp>

#include "base/config.h"

#if BRAID_HAVE_GLOO
#include <stdlib.h>

#include <set>
#include <string>
#include <vector>

#include "collectives/gloo/gloo_devices.h"
#include "tests/support/threads.h"

using braid::testing::new_thread_policies;
using braid::testing::thread_ids;

TEST_CASE("gloo devices: the event-loop thread runs SCHED_BATCH, the caller keeps its policy", "[gloo]") {
  const int caller_policy = ::sched_getscheduler(0);
  const auto before = thread_ids();
  auto devices = braid::collectives::gloo::tcp_devices({"lo"});
  REQUIRE(devices.size() == 1);
  const auto policies = new_thread_policies(before);
  REQUIRE(policies.size() == 1);  // gloo's loop; the short-lived thread that made the device is joined
  CHECK(policies[0] == SCHED_BATCH);
  CHECK(::sched_getscheduler(0) == caller_policy);
}

TEST_CASE("gloo devices: BRAID_GLOO_LOOP_BATCH=0 leaves the loop at the caller's policy", "[gloo]") {
  REQUIRE(::setenv("BRAID_GLOO_LOOP_BATCH", "0", 1) == 0);
  const auto before = thread_ids();
  auto devices = braid::collectives::gloo::tcp_devices({"lo"});
  ::unsetenv("BRAID_GLOO_LOOP_BATCH");
  const auto policies = new_thread_policies(before);
  REQUIRE(policies.size() == 1);
  CHECK(policies[0] == ::sched_getscheduler(0));
}

#endif
