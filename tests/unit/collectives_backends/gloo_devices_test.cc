// gloo's TCP devices (collectives/gloo/gloo_devices.h): the event-loop thread each device starts runs
// under SCHED_BATCH, so that its wake-ups never preempt the worker whose pair lock it then spins on
// (collectives/gloo/README.md, "Choices"); BRAID_GLOO_LOOP_BATCH=0 leaves it at the creating thread's
// policy. The loop thread is found as the thread that appears when the device is made.
#include <catch2/catch.hpp>

#include "base/config.h"

#if BRAID_HAVE_GLOO
#include <dirent.h>
#include <sched.h>
#include <stdlib.h>

#include <set>
#include <string>
#include <vector>

#include "collectives/gloo/gloo_devices.h"

namespace {

std::set<int> thread_ids() {
  std::set<int> ids;
  DIR* dir = ::opendir("/proc/self/task");
  REQUIRE(dir != nullptr);
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ids.insert(std::stoi(e->d_name));
  }
  ::closedir(dir);
  return ids;
}

// The scheduling policies of the threads that exist now but not in `before`.
std::vector<int> new_thread_policies(const std::set<int>& before) {
  std::vector<int> policies;
  for (int tid : thread_ids()) {
    if (!before.count(tid)) policies.push_back(::sched_getscheduler(tid));
  }
  return policies;
}

}  // namespace

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
