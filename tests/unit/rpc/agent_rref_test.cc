// RRefs through the agent: remote() of functions and classes, owner queries, local_value and to_here,
// method proxies, forking chains across three workers with the reference counts watched on the owner,
// creation errors, and zero leaked RRefs after a graceful shutdown.
#include <catch2/catch.hpp>

#include "base/config.h"
#include "rpc/agent.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/unit/rpc/support/agent_job.h"
#include "tests/unit/rpc/test_registry.h"

using namespace braid;
using namespace braid::rpc;
using braid::rpc::testing::AgentJob;
using braid::rpc::testing::eventually;

namespace {

std::string transport_under_test() { return GENERATE(from_range(testing::transports_under_test())); }

}  // namespace

TEST_CASE("remote() keeps a function's result on the callee", "[rpc][rref]") {
  const std::string transport = transport_under_test();
  AgentJob job(2, testing::test_registry(), {}, transport);
  const Tensor a = from_vector<float>({1, 2});
  RRef r = job[0].remote(job[0].worker("worker1"), "add", {Value(a), Value(a)});
  CHECK(r.owner() == job[0].worker("worker1"));
  CHECK(r.owner_name() == "worker1");
  CHECK_FALSE(r.is_owner());
  CHECK(equal(r.to_here().as_tensor(), from_vector<float>({2, 4})));
  CHECK(eventually([&] { return r.confirmed_by_owner(); }));
  CHECK_THROWS_WITH(r.local_value(), Catch::Contains("is not the owner") && Catch::Contains("worker1"));
  job.shutdown_all(true);
  CHECK(job[0].leaked_rrefs() == 0);
  CHECK(job[1].leaked_rrefs() == 0);
}

TEST_CASE("a remote object is called through rpc_sync / rpc_async / remote proxies", "[rpc][rref]") {
  const std::string transport = transport_under_test();
  {
    AgentJob job(2, testing::test_registry(), {}, transport);
    RRef counter = job[0].remote(job[0].worker("worker1"), "Counter", {Value(int64_t{10})});
    CHECK(counter.rpc_sync().call("add", {Value(int64_t{5})}).as_int() == 15);
    CHECK(counter.rpc_async().call("add", {Value(int64_t{1})}).value().as_int() == 16);
    RRef got = counter.remote().call("get", {});
    CHECK(got.to_here().as_int() == 16);
    // to_here of an object sends its class's to_value() form.
    CHECK(counter.to_here().as_dict().find("value")->as_int() == 16);
    CHECK_THROWS_WITH(counter.rpc_sync().call("nope", {}), Catch::Contains("has no method 'nope'"));
    job.shutdown_all(true);
    CHECK(job[1].leaked_rrefs() == 0);
  }
  CHECK(testing::g_live_counters.load() == 0);
}

TEST_CASE("the owner's local value and an RRef wrapping a local value", "[rpc][rref]") {
  AgentJob job(2, testing::test_registry());
  RRef mine = job[0].make_local_rref(Value("here"));
  CHECK(mine.is_owner());
  CHECK(mine.confirmed_by_owner());
  CHECK(mine.local_value().as_string() == "here");
  CHECK(mine.to_here().as_string() == "here");
  // Sent to another worker, the owner counts the fork until that worker drops it.
  const Value back = job[0].call_sync(job[0].worker("worker1"), "identity_rref", {Value(mine)});
  CHECK(back.as_rref().is_owner());
  CHECK(back.as_rref().local_value().as_string() == "here");
  CHECK(eventually([&] { return job[0].rref_counts().owned == 0 && job[1].rref_counts().users == 0; }));
}

TEST_CASE("remote() to self builds an owner RRef", "[rpc][rref]") {
  AgentJob job(2, testing::test_registry());
  RRef c = job[0].remote(job[0].self(), "Counter", {Value(int64_t{3})});
  CHECK(c.is_owner());
  CHECK(c.rpc_sync().call("add", {Value(int64_t{4})}).as_int() == 7);
  CHECK(c.local_value().describe() == "object Counter");
}

TEST_CASE("an owner RRef made by remote() to self travels as an argument of calls to self", "[rpc][rref]") {
  const std::string transport = transport_under_test();
  AgentJob job(2, testing::test_registry(), {}, transport);
  {
    RRef c = job[0].remote(job[0].self(), "Counter", {Value(int64_t{3})});
    // The function gets the owner's handle back (as get_remote_grads(module_rref, ...)
    // of torch's ddp_under_dist_autograd_test.py does on worker0).
    CHECK(job[0].call_sync(job[0].self(), "bump_through", {Value(c), Value(int64_t{2})}).as_int() == 5);
    RRef back = job[0].call_sync(job[0].self(), "identity_rref", {Value(c)}).as_rref();
    CHECK(back.is_owner());
    CHECK(back.rpc_sync().call("add", {Value(int64_t{1})}).as_int() == 6);
    // An async call whose caller drops its handle before the call is decoded still finds the value.
    Future<Value> later = job[0].call_async(job[0].self(), "bump_through", {Value(c), Value(int64_t{4})});
    c = RRef();
    back = RRef();
    CHECK(later.value().as_int() == 10);
  }
  job.shutdown_all(true);
  CHECK(job[0].leaked_rrefs() == 0);
}

TEST_CASE("an RRef forked across three workers keeps its value alive until the last user is gone",
          "[rpc][rref]") {
  const std::string transport = transport_under_test();
  const int live_before = testing::g_live_counters.load();
  AgentJob job(3, testing::test_registry(), {}, transport);
  {
    // worker0 creates a Counter owned by worker2, passes it to worker1, which calls through it.
    RRef c = job[0].remote(job[0].worker("worker2"), "Counter", {Value(int64_t{0})});
    CHECK(job[0].call_sync(job[0].worker("worker1"), "bump_through", {Value(c), Value(int64_t{7})}).as_int() == 7);
    // worker1 receives it and hands it back to worker0 (a fork of a fork).
    const Value back = job[0].call_sync(job[0].worker("worker1"), "identity_rref", {Value(c)});
    CHECK(back.as_rref().owner_name() == "worker2");
    CHECK(back.as_rref().rpc_sync().call("get", {}).as_int() == 7);
    CHECK(eventually([&] { return job[2].rref_counts().owned == 1; }));
    CHECK(testing::g_live_counters.load() == live_before + 1);
  }
  // Every handle is gone: the owner hears every delete and frees the object.
  CHECK(eventually([&] { return job[2].rref_counts().owned == 0; }));
  CHECK(eventually([&] { return testing::g_live_counters.load() == live_before; }));
  CHECK(job[0].rref_counts().pending_children == 0);
  CHECK(job[1].rref_counts().pending_children == 0);
  job.shutdown_all(true);
  for (int i = 0; i < 3; ++i) CHECK(job[i].leaked_rrefs() == 0);
}

TEST_CASE("a failed remote() creation surfaces at to_here and at method calls", "[rpc][rref]") {
  AgentJob job(2, testing::test_registry());
  RRef r = job[0].remote(job[0].worker("worker1"), "fail", {Value("ctor")});
  CHECK_THROWS_WITH(r.to_here(), Catch::Contains("boom: ctor"));
  RRef u = job[0].remote(job[0].worker("worker1"), "no_such_class", {});
  CHECK_THROWS_WITH(u.to_here(), Catch::Contains("no_such_class"));
  job.shutdown_all(true);
  CHECK(job[1].leaked_rrefs() == 0);
}

TEST_CASE("graceful shutdown releases RRefs users still hold, and waits for calls in flight", "[rpc][rref]") {
  const std::string transport = transport_under_test();
  AgentJob job(3, testing::test_registry(), {}, transport);
  RRef held = job[1].remote(job[1].worker("worker2"), "Counter", {Value(int64_t{1})});
  CHECK(held.to_here().as_dict().find("value")->as_int() == 1);
  std::vector<Future<Value>> inflight;
  for (int i = 0; i < 4; ++i) {
    inflight.push_back(job[0].call_async(job[0].worker("worker2"), "sleep_ms", {Value(int64_t{100})}));
  }
  job.shutdown_all(true);
  for (auto& f : inflight) CHECK(f.value(Millis(1)).as_int() == 100);
  CHECK(job[2].leaked_rrefs() == 0);
  CHECK_THROWS_WITH(held.to_here(), Catch::Contains("shut down"));
}

TEST_CASE("a method call right after remote() finds the value, even on another pool thread", "[rpc][rref]") {
  // The kRemoteCall and the kCall arrive in order but run on different pool threads; the owner counts
  // the creator's fork on arrival, so the call waits for the value instead of failing ("owns no RRef").
  const std::string transport = transport_under_test();
  AgentJob job(2, testing::test_registry(), {}, transport);
  std::vector<Future<Value>> sums;
  std::vector<RRef> counters;
  for (int i = 0; i < 100; ++i) {
    counters.push_back(job[0].remote(job[0].worker("worker1"), "Counter", {Value(int64_t{i})}));
    sums.push_back(counters.back().rpc_async().call("add", {Value(int64_t{1})}));
  }
  for (int i = 0; i < 100; ++i) CHECK(sums[static_cast<size_t>(i)].value(Millis(10'000)).as_int() == i + 1);
}
