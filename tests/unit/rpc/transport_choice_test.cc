// RPC's transport choice (issue 33): `auto` is the default everywhere and means ucx when braid was built
// with UCX, tcp otherwise; the agent says which and why; a job whose workers end up on different transports
// fails at init on every worker, naming both.
#include <catch2/catch.hpp>

#include <future>
#include <memory>

#include "base/config.h"
#include "base/error.h"
#include "rpc/agent.h"
#include "rpc/api.h"
#include "rpc/transport.h"
#include "store/hash_store.h"
#include "tests/unit/rpc/support/agent_job.h"
#include "tests/unit/rpc/support/loopback_transport.h"

using namespace braid;
using namespace braid::rpc;
using Catch::Matchers::Contains;

TEST_CASE("transport auto is the default of every way to start RPC", "[rpc][transport_choice]") {
  CHECK(RpcBackendOptions{}.transport == "auto");
  CHECK(RpcAgentOptions{}.transport == "auto");
}

TEST_CASE("auto means ucx when built with UCX and tcp otherwise, and says why", "[rpc][transport_choice]") {
  const TransportChoice automatic = choose_transport("auto");
  if (BRAID_HAVE_UCX) {
    CHECK(automatic.name == "ucx");
    CHECK_THAT(automatic.reason, Contains("auto: braid was built with UCX") && Contains("shared memory") &&
                                     Contains("between hosts"));
  } else {
    CHECK(automatic.name == "tcp");
    CHECK(automatic.reason == "auto: braid was built without UCX");
  }
  CHECK(choose_transport("tcp").name == "tcp");
  CHECK(choose_transport("tcp").reason == "asked for");
  if (BRAID_HAVE_UCX) {
    CHECK(choose_transport("ucx").name == "ucx");
  } else {
    CHECK_THROWS_WITH(choose_transport("ucx"), Contains("'ucx'") && Contains("libucx-dev"));
  }
  CHECK_THROWS_AS(choose_transport("tensorpipe"), InvalidArgument);
  CHECK_THROWS_WITH(choose_transport("tensorpipe"), Contains("'tensorpipe'") && Contains("auto, tcp"));
  CHECK_THROWS_AS(create_transport("", TransportOptions{}), InvalidArgument);
}

TEST_CASE("a job on the default transport runs on the one auto chose", "[rpc][transport_choice]") {
  Registry registry;
  registry.add_function("one", [](const Args&) { return Value(int64_t{1}); });
  testing::AgentJob job(2, registry, {}, "auto");
  for (int i = 0; i < 2; ++i) {
    CHECK(job[i].transport_name() == choose_transport("auto").name);
    CHECK(job[i].transport_reason() == choose_transport("auto").reason);
  }
  CHECK(job[0].call_sync(job[0].worker("worker1"), "one", {}).as_int() == 1);
  job.shutdown_all(true);
}

TEST_CASE("workers on different transports fail at init, each naming both", "[rpc][transport_choice]") {
  // worker0 on tcp as asked, worker1 on a transport handed to its agent (the loopback of the tests): what
  // a job gets when one host's braid lacks UCX, or one rank's job file differs.
  Registry registry;
  auto store = std::make_shared<store::HashStore>();
  auto hub = std::make_shared<testing::LoopbackHub>();
  RpcAgentOptions o;
  o.join_timeout = Millis(20'000);
  const auto start = [&](int id) {
    return std::async(std::launch::async, [&, id] {
      RpcAgentOptions mine = o;
      mine.transport = "tcp";
      std::unique_ptr<Transport> t;
      if (id == 1) t = std::make_unique<testing::LoopbackTransport>(hub, 1);
      return std::make_unique<RpcAgent>("worker" + std::to_string(id), id, 2, store, mine, registry, std::move(t));
    });
  };
  auto a = start(0);
  auto b = start(1);
  for (auto* f : {&a, &b}) {
    try {
      f->get();
      FAIL("init_rpc of a mixed job succeeded");
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      INFO(what);
      CHECK_THAT(what, Contains("disagree on the RPC transport"));
      CHECK_THAT(what, Contains("'worker0' (id 0) uses tcp (asked for)"));
      CHECK_THAT(what, Contains("'worker1' (id 1) uses loopback (given to the agent)"));
    }
  }
}
