// The RPC agent's calls: rpc_sync / rpc_async / then, values of every kind, keyword arguments, remote
// errors, unknown names, timeouts, async functions, nested calls, calls to self, many threads at once,
// peer failure and calls after shutdown. Agents in one process over each transport.
#include <catch2/catch.hpp>

#include <array>
#include <thread>

#include <boost/asio.hpp>

#include "base/config.h"
#include "rpc/agent.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/unit/rpc/support/agent_job.h"
#include "tests/unit/rpc/test_registry.h"

using namespace braid;
using namespace braid::rpc;
using braid::rpc::testing::AgentJob;

namespace {

std::string transport_under_test() { return GENERATE(from_range(testing::transports_under_test())); }

}  // namespace

TEST_CASE("rpc_sync, rpc_async and then return the callee's result", "[rpc][agent]") {
  const std::string transport = transport_under_test();
  INFO("transport " << transport);
  AgentJob job(2, testing::test_registry(), {}, transport);
  const Tensor a = from_vector<float>({1, 2, 3});
  const Tensor b = from_vector<float>({10, 20, 30});
  Value sum = job[0].call_sync(job[0].worker("worker1"), "add", {Value(a), Value(b)});
  CHECK(equal(sum.as_tensor(), from_vector<float>({11, 22, 33})));

  Future<Value> f = job[1].call_async(job[1].worker("worker0"), "concat", Args({Value("x"), Value("y")}, [] {
                                        Dict kw;
                                        kw.set("sep", Value("-"));
                                        return kw;
                                      }()));
  auto upper = f.then([](const Value& v) { return v.as_string() + "!"; });
  CHECK(upper.value() == "x-y!");
  CHECK(f.value().as_string() == "x-y");
}

TEST_CASE("values of every kind survive the round trip", "[rpc][agent]") {
  const std::string transport = transport_under_test();
  AgentJob job(2, testing::test_registry(), {}, transport);
  Dict d;
  d.set("i", Value(int64_t{-7}));
  d.set("s", Value("text"));
  d.set("n", Value());
  const Tensor big = arange(0, 1 << 20, 1, DType::Int64);
  const Tensor strided = arange(0, 12, 1, DType::Float32).view({3, 4}).t();  // non-contiguous
  const Tensor empty_t = empty({0, 5}, DType::Float64);
  const Value in = tuple({Value(true), Value(3.5), Value(d), list({Value(big), Value(strided), Value(empty_t)}),
                          Value(Tensor()), Value(from_vector<bool>({true, false}))});
  const Value out = job[0].call_sync(job[0].worker("worker1"), "echo", {in});
  REQUIRE(out.is(Value::Kind::Tuple));
  const auto& items = out.as_tuple();
  REQUIRE(items.size() == 6);
  CHECK(items[0].as_bool());
  CHECK(items[1].as_double() == 3.5);
  CHECK(items[2].as_dict().find("i")->as_int() == -7);
  CHECK(items[2].as_dict().find("s")->as_string() == "text");
  CHECK(items[2].as_dict().find("n")->is_none());
  const auto& l = items[3].as_list();
  CHECK(equal(l[0].as_tensor(), big));
  CHECK(equal(l[1].as_tensor(), strided));
  CHECK(l[2].as_tensor().shape() == Shape{0, 5});
  CHECK_FALSE(items[4].as_tensor().defined());
  CHECK(equal(items[5].as_tensor(), from_vector<bool>({true, false})));
}

TEST_CASE("a remote exception comes back with the remote worker's name and message", "[rpc][agent]") {
  const std::string transport = transport_under_test();
  AgentJob job(2, testing::test_registry(), {}, transport);
  try {
    job[0].call_sync(job[0].worker("worker1"), "fail", {Value("bad input")});
    FAIL("no error");
  } catch (const RemoteError& e) {
    CHECK(e.worker() == "worker1");
    CHECK_THAT(e.what(), Catch::Contains("boom: bad input"));
  }
  auto f = job[0].call_async(job[0].worker("worker1"), "fail", {Value("async")});
  f.wait(std::chrono::milliseconds(5000));
  CHECK(f.has_error());
  CHECK_THROWS_WITH(f.value(), Catch::Contains("boom: async") && Catch::Contains("worker1"));
}

TEST_CASE("unknown functions and unknown workers give specific errors", "[rpc][agent]") {
  AgentJob job(2, testing::test_registry());
  CHECK_THROWS_WITH(job[0].call_sync(job[0].worker("worker1"), "no_such_fn", {}),
                    Catch::Contains("has no function or class named 'no_such_fn'") && Catch::Contains("worker1"));
  CHECK_THROWS_AS(job[0].worker("worker9"), InvalidArgument);
  CHECK_THROWS_WITH(job[0].worker("worker9"), Catch::Contains("unknown destination worker 'worker9'"));
  CHECK_THROWS_WITH(job[0].worker(5), Catch::Contains("unknown destination worker id 5"));
}

TEST_CASE("a call that outlives its timeout fails with TimeoutError", "[rpc][agent]") {
  const std::string transport = transport_under_test();
  AgentJob job(2, testing::test_registry(), {}, transport);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    job[0].call_sync(job[0].worker("worker1"), "sleep_ms", {Value(int64_t{600})}, Millis(100));
    FAIL("no timeout");
  } catch (const TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains("timed out after 100 ms") && Catch::Contains("worker1") &&
                             Catch::Contains("sleep_ms"));
  }
  CHECK(std::chrono::steady_clock::now() - t0 < Millis(550));
  // The late reply is dropped and the agent keeps working.
  CHECK(job[0].call_sync(job[0].worker("worker1"), "echo", {Value(int64_t{5})}).as_int() == 5);
}

TEST_CASE("an async function releases the worker thread until its future completes", "[rpc][agent]") {
  RpcAgentOptions one_thread;
  one_thread.num_worker_threads = 1;
  AgentJob job(2, testing::test_registry(), one_thread);
  auto pending = job[0].call_async(job[0].worker("worker1"), "wait_for_release", {});
  std::this_thread::sleep_for(Millis(20));
  CHECK_FALSE(pending.completed());
  // With one worker thread this call can only run if the async call gave its thread back.
  CHECK(job[0].call_sync(job[0].worker("worker1"), "release", {Value(int64_t{42})}, Millis(5000)).as_bool());
  CHECK(pending.value(Millis(5000)).as_int() == 42);
}

TEST_CASE("nested calls: worker0 calls worker1 which calls worker2", "[rpc][agent]") {
  const std::string transport = transport_under_test();
  AgentJob job(3, testing::test_registry(), {}, transport);
  for (int i = 0; i < 3; ++i) testing::g_agents[i] = &job[i];
  const Value out = job[0].call_sync(job[0].worker("worker1"), "forward_call",
                                     {Value("worker2"), Value(int64_t{1}), Value("concat"), Value("a"), Value("b")});
  CHECK(out.as_string() == "a+b");
  // An error two hops away names the worker it happened on.
  CHECK_THROWS_WITH(job[0].call_sync(job[0].worker("worker1"), "forward_call",
                                     {Value("worker2"), Value(int64_t{1}), Value("fail"), Value("deep")}),
                    Catch::Contains("worker2") && Catch::Contains("boom: deep"));
  for (auto& a : testing::g_agents) a = nullptr;
}

TEST_CASE("a worker can call itself", "[rpc][agent]") {
  AgentJob job(2, testing::test_registry());
  CHECK(job[1].call_sync(job[1].self(), "concat", {Value("p"), Value("q")}).as_string() == "p+q");
  CHECK_THROWS_AS(job[1].call_sync(job[1].self(), "fail", {Value("self")}), RemoteError);
}

TEST_CASE("many threads call concurrently and every call gets its own answer", "[rpc][agent]") {
  const std::string transport = transport_under_test();
  AgentJob job(3, testing::test_registry(), {}, transport);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        const int64_t x = t * 1000 + i;
        const int from = t % 3;
        const int to = (t + 1 + i % 2) % 3;
        const Value v = job[from].call_sync(job[from].worker(to), "echo", {Value(x)});
        if (v.as_int() != x) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong.load() == 0);
}

TEST_CASE("when a peer dies, pending calls to it fail promptly naming it", "[rpc][agent]") {
  const std::string transport = transport_under_test();
  AgentJob job(2, testing::test_registry(), {}, transport);
  auto pending = job[0].call_async(job[0].worker("worker1"), "sleep_ms", {Value(int64_t{3000})}, Millis(20'000));
  std::this_thread::sleep_for(Millis(50));
  const auto t0 = std::chrono::steady_clock::now();
  std::thread killer([&] { job[1].shutdown(false); });
  pending.wait(Millis(10'000));
  killer.join();
  CHECK(std::chrono::steady_clock::now() - t0 < Millis(5000));
  REQUIRE(pending.has_error());
  CHECK_THROWS_WITH(pending.value(), Catch::Contains("worker1"));
  // Later calls to the dead peer fail too, rather than hang.
  auto later = job[0].call_async(job[0].worker("worker1"), "echo", {Value(int64_t{1})}, Millis(10'000));
  later.wait(Millis(15'000));
  CHECK(later.has_error());
  job[0].shutdown(false);
}

TEST_CASE("calls after shutdown are refused", "[rpc][agent]") {
  AgentJob job(2, testing::test_registry());
  job.shutdown_all(true);
  CHECK_THROWS_WITH(job[0].call_async(job[0].worker("worker1"), "echo", {Value(1)}),
                    Catch::Contains("has shut down"));
}

TEST_CASE("a duplicate worker name is a clear error", "[rpc][agent]") {
  auto store = std::make_shared<store::HashStore>();
  auto hub = std::make_shared<testing::LoopbackHub>();
  RpcAgentOptions o;
  o.join_timeout = Millis(3000);
  auto first = std::async(std::launch::async, [&] {
    return std::make_unique<RpcAgent>("same", 0, 2, store, o, testing::test_registry(),
                                      std::make_unique<testing::LoopbackTransport>(hub, 0));
  });
  std::this_thread::sleep_for(Millis(20));
  CHECK_THROWS_WITH(RpcAgent("same", 1, 2, store, o, testing::test_registry(),
                             std::make_unique<testing::LoopbackTransport>(hub, 1)),
                    Catch::Contains("RPC worker name 'same' is already taken by worker 0"));
  // The first worker stops waiting for the broken one and says why.
  CHECK_THROWS_WITH(first.get(), Catch::Contains("failed to join") && Catch::Contains("already taken"));
}

TEST_CASE("garbage on a raw socket to an agent closes that connection and nothing else", "[rpc][agent]") {
  AgentJob job(2, testing::test_registry(), {}, "tcp");
  const auto& addr = job[1].address_of(1);
  const std::string text(addr.begin(), addr.end());
  const auto colon = text.rfind(':');
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket raw(io);
  raw.connect({boost::asio::ip::make_address(text.substr(0, colon)),
               static_cast<unsigned short>(std::stoi(text.substr(colon + 1)))});
  // The agent's challenge comes first (docs/SECURITY.md); 64 bytes of garbage are then a wrong response.
  std::array<uint8_t, 40> challenge{};
  boost::asio::read(raw, boost::asio::buffer(challenge));
  const std::vector<uint8_t> garbage(64, 0xAB);
  boost::asio::write(raw, boost::asio::buffer(garbage));
  // The agent's transport closes the connection: a read ends with EOF (or a reset), not with data.
  // Polled without blocking, so that a transport that failed to close cannot hang the test.
  raw.non_blocking(true);
  std::array<uint8_t, 16> buf{};
  boost::system::error_code ec = boost::asio::error::would_block;
  const auto deadline = std::chrono::steady_clock::now() + Millis(5000);
  while (ec == boost::asio::error::would_block && std::chrono::steady_clock::now() < deadline) {
    raw.read_some(boost::asio::buffer(buf), ec);
    if (ec == boost::asio::error::would_block) std::this_thread::sleep_for(Millis(5));
  }
  CHECK((ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset));
  // The agent goes on serving its peers.
  CHECK(job[0].call_sync(job[0].worker("worker1"), "concat", {Value("still"), Value("here")}).as_string() ==
        "still+here");
}
