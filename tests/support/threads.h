// The threads of this process, for tests that check what a component's own threads are set to (their
// scheduling policy): a component's threads are the ones that appear while it is made.
#pragma once

#include <dirent.h>
#include <sched.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace braid::testing {

inline std::set<int> thread_ids() {
  std::set<int> ids;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) throw std::runtime_error("cannot list /proc/self/task");
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ids.insert(std::stoi(e->d_name));
  }
  ::closedir(dir);
  return ids;
}

// The scheduling policies of the threads that exist now but not in `before`.
inline std::vector<int> new_thread_policies(const std::set<int>& before) {
  std::vector<int> policies;
  for (int tid : thread_ids()) {
    if (!before.count(tid)) policies.push_back(::sched_getscheduler(tid));
  }
  return policies;
}

}  // namespace braid::testing
