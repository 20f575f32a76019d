// LocalPeers: what a rank sees of the job's other processes on its host, and the stops it remembers after
// a launcher continued the stopped rank (runtime/run/local_peers.h).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "runtime/run/local_peers.h"

namespace braid::runtime {
namespace {

using namespace std::chrono_literals;
using Filter = LocalPeers::Filter;

std::string name(int r) { return "rank " + std::to_string(r) + " (test)"; }

// A child process that only waits, killed and reaped when the test ends.
struct Child {
  Child() {
    pid = ::fork();
    if (pid == 0) {
      for (;;) ::pause();
    }
    REQUIRE(pid > 0);
  }
  ~Child() { end(); }
  void end() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
  // SIGSTOP or SIGCONT, returning once the kernel has done it (waitpid reports the change).
  void stop() {
    ::kill(pid, SIGSTOP);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, WUNTRACED) == pid);
    REQUIRE(WIFSTOPPED(status));
  }
  void cont() {
    ::kill(pid, SIGCONT);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, WCONTINUED) == pid);
    REQUIRE(WIFCONTINUED(status));
  }
  pid_t pid = -1;
};

}  // namespace

TEST_CASE("LocalPeers names a stopped peer after it was continued, and one that died after a stop",
          "[runtime][local_peers]") {
  Child child;
  LocalPeers peers;
  // Rank 0 is this process (left out), rank 1 the child, rank 2 a process on another host.
  peers.set({{0, {LocalPeers::this_host(), ::getpid()}},
             {1, {LocalPeers::this_host(), child.pid}},
             {2, {"elsewhere", 1}}},
            0);
  const std::string pid = std::to_string(child.pid);

  CHECK(peers.describe(Filter::kFailed, name, 30s).empty());  // running: nothing to name
  CHECK(peers.ended(1, name).empty());

  child.stop();
  CHECK(peers.describe(Filter::kDead, name, 30s).empty());  // a stopped peer may still be continued
  CHECK(peers.describe(Filter::kFailed, name, 30s) == "rank 1 (test) is stopped (pid " + pid + ")");
  CHECK(peers.ended(1, name).empty());

  child.cont();
  // A launcher's SIGCONT: the stop is remembered.
  const std::string stopped = peers.describe(Filter::kStopped, name, 30s);
  CHECK_THAT(stopped, Catch::StartsWith("rank 1 (test) was stopped (pid " + pid + "): seen stopped for ") &&
                          Catch::EndsWith(" s ago"));
  CHECK_THAT(peers.describe(Filter::kFailed, name, 30s), Catch::StartsWith("rank 1 (test) was stopped"));
  CHECK(peers.describe(Filter::kDead, name, 30s).empty());
  CHECK(peers.describe(Filter::kStopped, name, 0s).empty());  // past the memory window: forgotten

  child.end();
  CHECK_THAT(peers.describe(Filter::kFailed, name, 30s),
             Catch::StartsWith("rank 1 (test) died (its process, pid " + pid + ", is gone, after it was seen stopped"));
  CHECK_THAT(peers.ended(1, name), Catch::StartsWith("rank 1 (test) died (its process, pid " + pid + ", is gone)"));
  CHECK(peers.ended(2, name).empty());  // another host: not known
  CHECK(peers.ended(0, name).empty());  // itself
}

TEST_CASE("LocalPeers forgets stops older than the memory window, and every stop on a new table",
          "[runtime][local_peers]") {
  LocalPeers peers;
  // Rank 1 runs here (this test's own pid stands in for it: it is running).
  peers.set({{0, {"elsewhere", 1}}, {1, {LocalPeers::this_host(), ::getpid()}}}, 0);
  peers.record_stop(1, LocalPeers::Clock::now() - 10s);
  CHECK(peers.describe(Filter::kStopped, name, 5s).empty());
  CHECK_THAT(peers.describe(Filter::kStopped, name, 60s), Catch::Contains("until 10.0 s ago"));
  peers.set({{0, {"elsewhere", 1}}, {1, {LocalPeers::this_host(), ::getpid()}}}, 0);
  CHECK(peers.describe(Filter::kStopped, name, 60s).empty());
}

}  // namespace braid::runtime
