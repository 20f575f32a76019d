// The rank service's pieces that need no job: the signal watcher, the pause watch and the sweep of
// distributed-autograd contexts that a dead trainer left behind.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "dist_autograd/context.h"
#include "dist_autograd/context_state.h"
#include "rpc/api.h"
#include "runtime/run/instance_registry.h"
#include "runtime/run/pause_watch.h"
#include "runtime/run/rank_service.h"
#include "runtime/run/signals.h"
#include "store/hash_store.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/unit/dist_autograd/solo_rpc.h"

namespace braid::runtime {
namespace {

// Restores this thread's signal mask and the default actions when the test ends.
struct SignalsRestored {
  SignalsRestored() { pthread_sigmask(SIG_SETMASK, nullptr, &mask); }
  ~SignalsRestored() {
    for (int s : {SIGTERM, SIGUSR1, SIGINT}) ::signal(s, SIG_DFL);
    pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  }
  sigset_t mask;
};

TEST_CASE("run: a SignalWatcher takes SIGUSR1 and SIGTERM sent to the process", "[runtime][run]") {
  SignalsRestored restore;
  block_job_signals();
  std::atomic<int> got{0};
  std::atomic<int> count{0};
  {
    SignalWatcher watcher([&](int signo) {
      got = signo;
      ++count;
    });
    for (int signo : {SIGUSR1, SIGTERM}) {
      const int before = count;
      ::kill(::getpid(), signo);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (count == before && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      CHECK(got == signo);
      CHECK(signal_name(got) == (signo == SIGUSR1 ? "SIGUSR1" : "SIGTERM"));
    }
  }  // joins within one wait
  CHECK(count == 2);
}

// A thread that a library started before block_job_signals() (OpenBLAS's pool) does not block the job's
// signals, and the kernel may hand it one: the handler there sends it on to the watcher, which takes it at
// once, not at the end of its wait (mpirun ends a rank within moments of its SIGTERM), and only once. The
// watcher's wait is 3 s here: a signal taken only when the wait ends would miss the 2.5 s bound.
TEST_CASE("run: a signal that reaches a thread not blocking it is handled at once, and once", "[runtime][run]") {
  SignalsRestored restore;
  block_job_signals();
  std::atomic<int> count{0};
  std::atomic<bool> release{false};
  std::atomic<bool> ready{false};
  // Created with the signals unblocked, as a library's thread is.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  std::thread library([&] {
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    ready = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  {
    SignalWatcher watcher([&](int) { ++count; }, std::chrono::milliseconds(3000));
    ::pthread_kill(library.native_handle(), SIGUSR1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
    while (count == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK(count == 1);
  }  // joins at the end of its 3 s wait: a second take of the same signal would have come by then
  release = true;
  library.join();
  CHECK(count == 1);
}

TEST_CASE("run: a PauseWatch notices that its process was stopped and continued", "[runtime][run]") {
  int to_parent[2];
  REQUIRE(::pipe(to_parent) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child: a watch, "ready", then (after the parent's SIGSTOP ... SIGCONT) what the watch saw.
    ::close(to_parent[0]);
    std::string seen;
    {
      PauseWatch watch;
      (void)!::write(to_parent[1], "r", 1);
      // The parent stops this process 0.2 s from now for 1.5 s; the sleep spans both.
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      seen = PauseWatch::describe_recent(std::chrono::seconds(30));
    }
    (void)!::write(to_parent[1], seen.data(), seen.size());
    ::_exit(0);
  }
  ::close(to_parent[1]);
  char ready = 0;
  REQUIRE(::read(to_parent[0], &ready, 1) == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::kill(child, SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ::kill(child, SIGCONT);
  std::string seen;
  char buf[256];
  for (ssize_t n; (n = ::read(to_parent[0], buf, sizeof(buf))) > 0;) seen.append(buf, static_cast<size_t>(n));
  ::close(to_parent[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  INFO(seen);
  REQUIRE(seen.rfind("this process did not run for ", 0) == 0);
  // At least the 1.5 s it was stopped, less the tick it asked for.
  CHECK(std::strtod(seen.c_str() + std::strlen("this process did not run for "), nullptr) >= 1.3);
  CHECK(seen.find("(stopped, or starved of CPU)") != std::string::npos);
}

TEST_CASE("run: a pause counts only within the window asked for", "[runtime][run]") {
  const auto now = PauseWatch::Clock::now();
  PauseWatch::record({std::chrono::seconds(6), now - std::chrono::seconds(10)});
  CHECK(!PauseWatch::recent(std::chrono::seconds(5)));
  CHECK(PauseWatch::describe_recent(std::chrono::seconds(5)).empty());
  const auto p = PauseWatch::recent(std::chrono::seconds(20));
  REQUIRE(p);
  CHECK(p->length == std::chrono::seconds(6));
  CHECK(PauseWatch::describe_recent(std::chrono::seconds(20)).rfind("this process did not run for 6.0 s", 0) == 0);
  PauseWatch::record({std::chrono::seconds(1), now - std::chrono::hours(1)});  // leave nothing recent behind
}

TEST_CASE("run: the placement line groups ranks by host, in runs", "[runtime][run]") {
  store::HashStore store;
  // As publish_process() writes them: "<host> <pid>".
  const char* where[] = {"bh2 11", "bh1 12", "bh1 13", "bh2 14", "bh1 15", "bh2 16", "bh1 17"};
  for (int r = 0; r < 7; ++r) store.set("braid/process/" + std::to_string(r), store::to_bytes(where[r]));
  RankService::instance().read_processes(store, 7);
  CHECK(RankService::instance().placement() == "2 hosts (bh1: ranks 1-2,4,6; bh2: ranks 0,3,5)");
  store::HashStore one;
  one.set("braid/process/0", store::to_bytes("vm 21"));
  RankService::instance().read_processes(one, 1);
  CHECK(RankService::instance().placement() == "1 host (vm)");
}

TEST_CASE("run: contexts older than the TTL are swept, younger ones kept", "[runtime][run]") {
  dist_autograd::testing::SoloRpc rpc;
  // As if a trainer that died had reached this worker: a context nobody will release.
  auto left = dist_autograd::ContextTable::instance().create(0);
  const int64_t id = left->id();
  left.reset();
  REQUIRE(dist_autograd::has_context(id));
  const auto listed = dist_autograd::list_contexts();
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].id == id);
  CHECK(listed[0].creator == 0);
  CHECK(RankService::sweep_contexts(std::chrono::seconds(60)) == 0);  // younger than the TTL
  CHECK(dist_autograd::has_context(id));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(RankService::sweep_contexts(std::chrono::milliseconds(20)) == 1);
  CHECK(!dist_autograd::has_context(id));
  CHECK(dist_autograd::num_contexts() == 0);
  dist_autograd::wait_for_releases(std::chrono::seconds(5));
}

TEST_CASE("run: named model instances are registered on their worker and looked up by name", "[runtime][run]") {
  dist_autograd::testing::SoloRpc rpc;
  register_instance_functions();
  clear_instances();
  const Tensor weight = from_vector<float>({1, 2, 3}, {3});
  rpc::rpc_sync("worker0", "braid.register_instance", {rpc::Value("em"), rpc::Value(rpc::RRef::local(rpc::Value(weight)))});
  const rpc::RRef found = lookup_instance("worker0", "em");
  CHECK(found.owner_name() == "worker0");
  CHECK(equal(found.to_here().as_tensor(), weight));
  CHECK(instance_names() == std::vector<std::string>{"em"});
  CHECK_THROWS_WITH(lookup_instance("worker0", "net"),
                    Catch::Contains("no model instance 'net' on worker 'worker0'") && Catch::Contains("em"));
  CHECK_THROWS_WITH(register_instance("em", found), Catch::Contains("'em' is registered already"));
  clear_instances();
  CHECK(instance_names().empty());
}

}  // namespace
}  // namespace braid::runtime
