// A peer process killed with SIGKILL while calls to it are pending: every pending future fails promptly
// with an error naming the peer, later calls fail rather than hang, and the surviving agent shuts down.
// The peer is a separate executable (rpc_test_peer) so that the kill is real: no destructor runs there.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "base/config.h"
#include "rpc/agent.h"
#include "store/tcp_store.h"
#include "tests/support/child_process.h"
#include "tests/unit/rpc/support/agent_job.h"

using namespace braid;
using namespace braid::rpc;

using braid::testing::ChildProcess;

namespace {

// The store this process serves for itself and the peer process it starts.
std::shared_ptr<store::TCPStore> master_store() {
  store::TcpStoreOptions so;
  so.is_master = true;
  so.wait_for_workers = false;
  so.timeout = Millis(20'000);
  return std::make_shared<store::TCPStore>("127.0.0.1", 0, so);
}

}  // namespace

TEST_CASE("a killed peer fails every pending call to it promptly, naming it", "[rpc][agent][killed]") {
  const std::string transport = GENERATE(from_range(rpc::testing::transports_under_test()));
  if (transport == "loopback") return;  // needs a real process boundary
  INFO("transport " << transport);
  auto st = master_store();
  ChildProcess peer(BRAID_RPC_TEST_PEER, {std::to_string(st->port()), transport});
  RpcAgentOptions o;
  o.transport = transport;
  o.join_timeout = Millis(20'000);
  Registry registry;
  RpcAgent agent("worker0", 0, 2, st, o, registry);
  const WorkerInfo& w1 = agent.worker("worker1");
  CHECK(agent.call_sync(w1, "peer.echo", {Value("hi")}, Millis(10'000)).as_string() == "hi");
  std::vector<Future<Value>> pending;
  for (int i = 0; i < 3; ++i) pending.push_back(agent.call_async(w1, "peer.sleep_ms", {Value(int64_t{20'000})}, Millis(30'000)));
  std::this_thread::sleep_for(Millis(100));
  const auto t0 = std::chrono::steady_clock::now();
  peer.kill_now();
  for (auto& f : pending) {
    f.wait(Millis(15'000));
    REQUIRE(f.has_error());
    CHECK_THROWS_WITH(f.value(), Catch::Contains("worker1"));
  }
  const auto took = std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - t0);
  INFO("pending calls failed after " << took.count() << " ms");
  CHECK(took < Millis(5000));
  auto later = agent.call_async(w1, "peer.echo", {Value("again")}, Millis(10'000));
  later.wait(Millis(15'000));
  CHECK(later.has_error());
  agent.shutdown(false);
}

namespace {

// The message of the exception `f` throws ("" when it throws none); fails the test unless it is a CommError.
template <typename F>
std::string comm_error_of(F&& f) {
  try {
    f();
  } catch (const CommError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected a CommError, got: " << e.what());
  }
  return "";
}

}  // namespace

// Graceful shutdown is a barrier of every worker; one that died never arrives. The survivor must stop
// waiting once the death is known and say which peer it was, not wait out its join timeout (300 s by
// default) and then blame a "timeout". The join timeout here is long enough that a wait for it would end
// in a TimeoutError (and the test would fail on the exception's type), never in the CommError checked.
TEST_CASE("graceful shutdown stops waiting for a peer known dead, naming it", "[rpc][agent][killed][shutdown]") {
  const std::string transport = GENERATE(from_range(rpc::testing::transports_under_test()));
  if (transport == "loopback") return;  // needs a real process boundary
  const bool talked = GENERATE(true, false);  // false: the death is found by shutdown's own probe
  INFO("transport " << transport << ", called the peer before it died: " << talked);
  auto st = master_store();
  ChildProcess peer(BRAID_RPC_TEST_PEER, {std::to_string(st->port()), transport});
  RpcAgentOptions o;
  o.transport = transport;
  o.join_timeout = Millis(60'000);
  Registry registry;
  RpcAgent agent("worker0", 0, 2, st, o, registry);
  const WorkerInfo& w1 = agent.worker("worker1");
  if (talked) {
    CHECK(agent.call_sync(w1, "peer.echo", {Value("hi")}, Millis(10'000)).as_string() == "hi");
    auto pending = agent.call_async(w1, "peer.sleep_ms", {Value(int64_t{20'000})}, Millis(30'000));
    peer.kill_now();
    pending.wait(Millis(15'000));
    REQUIRE(pending.has_error());
    REQUIRE(agent.dead_peers().count(1) == 1);
  } else {
    peer.kill_now();
    CHECK(agent.dead_peers().empty());
  }
  const std::string message = comm_error_of([&] { agent.shutdown(true); });
  INFO(message);
  CHECK_THAT(message, Catch::Contains("known dead") && Catch::Contains("'worker1'"));
  CHECK_FALSE(agent.is_running());
}

// A peer killed before it ever talked to this worker breaks no connection here; a job runtime sees its
// process end (RpcAgentOptions::peer_ended) and the barrier gives up at its first look, before the liveness
// probe (kProbeAfter) would find it: the reason is the runtime's, which the probe's connect error is not.
TEST_CASE("graceful shutdown takes a peer whose process ended as dead, from peer_ended", "[rpc][agent][killed][shutdown]") {
  const std::string transport = GENERATE(from_range(rpc::testing::transports_under_test()));
  if (transport == "loopback") return;  // needs a real process boundary
  INFO("transport " << transport);
  auto st = master_store();
  ChildProcess peer(BRAID_RPC_TEST_PEER, {std::to_string(st->port()), transport});
  std::atomic<bool> killed{false};
  std::atomic<int> asked_about{-1};
  RpcAgentOptions o;
  o.transport = transport;
  o.join_timeout = Millis(60'000);
  o.peer_ended = [&](int id) -> std::string {
    asked_about = id;
    return killed ? "its process, pid 4242, is gone (the test killed it)" : "";
  };
  Registry registry;
  RpcAgent agent("worker0", 0, 2, st, o, registry);
  peer.kill_now();
  killed = true;
  const std::string message = comm_error_of([&] { agent.shutdown(true); });
  INFO(message);
  CHECK_THAT(message, Catch::Contains("known dead") && Catch::Contains("'worker1' (its process, pid 4242, is gone"));
  CHECK(asked_about == 1);
  CHECK_FALSE(agent.is_running());
}
