// `braid bench rpc`'s pieces without a launcher: the latency statistics, braid's targets, the table and
// RESULT lines, and the caller's measurements run end to end between two agents in one process (over
// the in-process loopback transport and the real transports), including a callee whose echo is wrong.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <sstream>

#include "bench/rpc/rpc_bench.h"
#include "bench/rpc/socket_echo.h"
#include "rpc/agent.h"
#include "rpc/registry.h"
#include "tensor/factory.h"
#include "tests/unit/rpc/support/agent_job.h"

using namespace braid;
using namespace braid::bench;
using braid::rpc::testing::AgentJob;

namespace {

// key=value pairs of each "RESULT rpc ..." line, in order.
std::vector<std::map<std::string, std::string>> parse_results(const std::string& text) {
  std::vector<std::map<std::string, std::string>> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("RESULT rpc ", 0) != 0) continue;
    std::istringstream words(line.substr(11));
    std::map<std::string, std::string> kv;
    std::string word;
    while (words >> word) {
      const auto eq = word.find('=');
      if (eq != std::string::npos) kv[word.substr(0, eq)] = word.substr(eq + 1);
    }
    out.push_back(std::move(kv));
  }
  return out;
}

RpcBenchRow row(std::string op, int64_t bytes, double p50_us, double calls_per_s, double gbs = 0) {
  RpcBenchRow r;
  r.op = std::move(op);
  r.bytes = bytes;
  r.calls = 10;
  r.has_latency = r.op != "async";
  r.min_us = p50_us / 2;
  r.p50_us = p50_us;
  r.p99_us = p50_us * 2;
  r.max_us = p50_us * 3;
  r.mean_us = 1e6 / calls_per_s;
  r.calls_per_s = calls_per_s;
  r.payload_gbs = gbs;
  return r;
}

RpcBenchOptions tiny_options() {
  RpcBenchOptions o;
  o.iters = 20;
  o.echo_iters = 2;
  o.warmup = 3;
  o.async_calls = 300;
  o.in_flight = 16;
  o.timeout_s = 20;
  return o;
}

std::string transport_under_test() { return GENERATE(from_range(rpc::testing::transports_under_test())); }

}  // namespace

TEST_CASE("latency summary: min, nearest-rank p50 and p99, max, mean", "[bench][bench_rpc]") {
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(i);  // unsorted on purpose
  const LatencySummary s = summarize_latencies(samples);
  CHECK(s.min_us == 1);
  CHECK(s.p50_us == 50);
  CHECK(s.p99_us == 99);
  CHECK(s.max_us == 100);
  CHECK(s.mean_us == Approx(50.5));

  const LatencySummary one = summarize_latencies({7.5});
  CHECK(one.p50_us == 7.5);
  CHECK(one.p99_us == 7.5);
  // 3 samples: p50 is the 2nd, p99 the 3rd.
  const LatencySummary three = summarize_latencies({30, 10, 20});
  CHECK(three.p50_us == 20);
  CHECK(three.p99_us == 30);
  CHECK_THROWS_AS(summarize_latencies({}), InvalidArgument);
}

TEST_CASE("braid's targets are attached to the right rows", "[bench][bench_rpc]") {
  CHECK(rpc_bench_target(row("empty", 0, 40, 1000))->met);
  CHECK_FALSE(rpc_bench_target(row("empty", 0, 40.5, 1000))->met);
  CHECK(rpc_bench_target(row("remote_to_here", 64, 99, 1000))->met);
  CHECK_FALSE(rpc_bench_target(row("remote_to_here", 64, 101, 1000))->met);
  CHECK(rpc_bench_target(row("echo", 16 << 20, 9000, 100, 4.0))->met);
  CHECK_FALSE(rpc_bench_target(row("echo", 16 << 20, 9000, 100, 3.99))->met);
  CHECK_FALSE(rpc_bench_target(row("socket_echo", 16 << 20, 9000, 100, 9.0)).has_value());
  CHECK_FALSE(rpc_bench_target(row("echo", 64, 20, 1000)).has_value());
  CHECK_FALSE(rpc_bench_target(row("echo", 1 << 20, 900, 1000, 1.0)).has_value());
  CHECK(rpc_bench_target(row("async", 0, 0, 100000))->met);
  CHECK_FALSE(rpc_bench_target(row("async", 0, 0, 99999))->met);
  CHECK(rpc_bench_target(row("async", 0, 0, 1))->key == "calls_per_s>=100000");
}

TEST_CASE("the table and the RESULT lines carry every row", "[bench][bench_rpc]") {
  RpcBenchReport report;
  report.transport = "tcp";
  report.threads = 4;
  report.in_flight = 64;
  report.rows = {row("empty", 0, 31.25, 20000), row("echo", 16 << 20, 3800, 260, 4.4),
                 row("remote_to_here", 64, 120, 8000), row("async", 0, 0, 101000),
                 row("socket_echo", 16 << 20, 3400, 300, 5.0)};
  report.rows[3].has_latency = false;
  const std::string table = format_rpc_bench_table(report);
  CHECK_THAT(table, Catch::Contains("rpc_sync empty") && Catch::Contains("p50 <= 40 us: met"));
  CHECK_THAT(table, Catch::Contains("16 MiB") && Catch::Contains("4.400 GB/s") && Catch::Contains(">= 4 GB/s: met"));
  CHECK_THAT(table, Catch::Contains("remote+to_here") && Catch::Contains("p50 <= 100 us: MISSED"));
  CHECK_THAT(table, Catch::Contains("rpc_async x64 empty") && Catch::Contains("101000 calls/s"));
  CHECK_THAT(table, Catch::Contains("plain socket echo") && Catch::Contains("5.000 GB/s"));
  CHECK_THAT(table, Catch::Contains("# tcp echo 16 MiB / plain socket echo: 0.88x (tcp goal >= 0.8x: met)"));
  CHECK_THAT(table, Catch::Contains("# targets met: 3 of 4"));

  const auto results = parse_results(format_rpc_bench_results(report));
  REQUIRE(results.size() == 5);
  CHECK(results[0].at("transport") == "tcp");
  CHECK(results[0].at("op") == "empty");
  CHECK(results[0].at("p50_us") == "31.25");
  CHECK(results[0].at("target") == "p50_us<=40");
  CHECK(results[0].at("met") == "1");
  CHECK(results[1].at("bytes") == std::to_string(16 << 20));
  CHECK(results[1].at("payload_gbs") == "4.4000");
  CHECK(results[1].at("vs_socket") == "0.8800");
  CHECK(results[2].at("met") == "0");
  CHECK(results[3].count("p50_us") == 0);  // async: no per-call latency
  CHECK(results[3].at("in_flight") == "64");
  CHECK(results[3].at("calls_per_s") == "101000.0");
  CHECK(results[4].at("op") == "socket_echo");
  CHECK(results[4].at("payload_gbs") == "5.0000");
  CHECK(results[4].count("target") == 0);

  // Below the goal it says so; the goal is the tcp transport's alone.
  report.rows[1].payload_gbs = 3.9;
  CHECK_THAT(format_rpc_bench_table(report), Catch::Contains("0.78x (tcp goal >= 0.8x: MISSED)"));
  report.transport = "ucx";
  const std::string ucx = format_rpc_bench_table(report);
  CHECK_THAT(ucx, Catch::Contains("# ucx echo 16 MiB / plain socket echo: 0.78x\n"));
}

TEST_CASE("the plain-socket reference echoes through the job's handshake", "[bench][bench_rpc]") {
  SocketEchoServer server;
  REQUIRE(server.port() > 0);
  const RpcBenchRow r = socket_echo_row(server.port(), 3 << 20, 1, 3);
  CHECK(r.op == "socket_echo");
  CHECK(r.bytes == 3 << 20);
  CHECK(r.calls == 3);
  CHECK(r.error.empty());
  CHECK(r.payload_gbs == Approx(static_cast<double>(r.bytes) / (r.mean_us * 1e3)));
  CHECK(r.min_us <= r.p50_us);
  // The server serves one connection after another.
  CHECK(socket_echo_row(server.port(), 1, 0, 1).calls == 1);
  // A server that has gone away fails the row loudly, naming the step.
  int gone_port = 0;
  {
    SocketEchoServer gone;
    gone_port = gone.port();
  }
  CHECK_THROWS_WITH(socket_echo_row(gone_port, 1, 0, 1), Catch::Contains("connect to 127.0.0.1"));
}

TEST_CASE("the caller's measurements run end to end between two agents", "[bench][bench_rpc]") {
  const std::string transport = transport_under_test();
  INFO("transport " << transport);
  rpc::Registry registry;
  register_rpc_bench_functions(registry);
  register_rpc_bench_functions(registry);  // twice is harmless
  AgentJob job(2, registry, {}, transport);
  SocketEchoServer socket_server;
  RpcBenchOptions o = tiny_options();
  o.socket_port = socket_server.port();
  const RpcBenchReport report = run_rpc_bench_caller(job[0], job[0].worker("worker1"), o);

  REQUIRE(report.rows.size() == 8);
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"empty", 0},          {"echo", 64},          {"echo", 1 << 20},          {"echo", 16 << 20},
      {"socket_echo", 1 << 20}, {"socket_echo", 16 << 20}, {"remote_to_here", 64}, {"async", 0}};
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& r = report.rows[i];
    INFO("row " << i << ": " << r.op << " " << r.bytes);
    CHECK(r.error == "");  // shows the error, e.g. a remote + to_here that the owner did not recognise
    CHECK(r.failed_calls == 0);
    CHECK(r.op == expected[i].first);
    CHECK(r.bytes == expected[i].second);
    CHECK(r.mean_us > 0);
    CHECK(r.calls_per_s == Approx(1e6 / r.mean_us));
    if (r.op == "async") {
      CHECK(r.calls == o.async_calls);
      CHECK_FALSE(r.has_latency);
    } else {
      CHECK(r.calls == (r.bytes >= (1 << 20) ? o.echo_iters : o.iters));
      CHECK(r.has_latency);
      CHECK(0 < r.min_us);
      CHECK(r.min_us <= r.p50_us);
      CHECK(r.p50_us <= r.p99_us);
      CHECK(r.p99_us <= r.max_us);
      CHECK(r.min_us <= r.mean_us);
      CHECK(r.mean_us <= r.max_us);
    }
    if (r.op == "echo" || r.op == "socket_echo") {
      CHECK(r.payload_gbs == Approx(static_cast<double>(r.bytes) / (r.mean_us * 1e3)));
    }
  }
  // The large echoes carry their ratio to the plain socket's.
  CHECK(socket_ratio(report, report.rows[3]) == Approx(report.rows[3].payload_gbs / report.rows[5].payload_gbs));
  CHECK_FALSE(socket_ratio(report, report.rows[1]).has_value());  // no 64-byte socket row
  CHECK(parse_results(format_rpc_bench_results(report)).size() == 8);
  job.shutdown_all(true);
  // Every remote() value was deleted on its owner once the caller dropped its RRef.
  CHECK(job[1].leaked_rrefs() == 0);
}

TEST_CASE("an echo that comes back different fails its rows, and the other rows still run", "[bench][bench_rpc]") {
  rpc::Registry registry;
  registry.add_function("bench.echo", [](const rpc::Args& a) -> rpc::Value {
    Tensor t = empty({a.at(0).as_tensor().numel()}, DType::Float32);
    std::fill_n(t.data<float>(), t.numel(), 0.0f);
    return t;
  });
  register_rpc_bench_functions(registry);  // keeps the broken echo
  AgentJob job(2, registry);
  std::vector<std::string> seen;
  const RpcBenchReport report = run_rpc_bench_caller(
      job[0], job[0].worker("worker1"), tiny_options(),
      [&](const RpcBenchReport&, const RpcBenchRow& r) { seen.push_back(r.op + " " + std::to_string(r.bytes)); });
  CHECK(seen == std::vector<std::string>{"empty 0", "echo 64", "echo 1048576", "echo 16777216", "remote_to_here 64",
                                         "async 0"});
  REQUIRE(report.rows.size() == 6);
  CHECK(report.rows[0].error.empty());
  for (size_t i = 1; i <= 3; ++i) {
    const auto& r = report.rows[i];
    INFO("echo of " << r.bytes << " bytes");
    CHECK_THAT(r.error, Catch::Contains(fmt::format("echo of a {}-byte tensor", r.bytes)) &&
                            Catch::Contains("worker1") && Catch::Contains("wrong"));
    CHECK(r.calls == 0);
  }
  CHECK(report.rows[5].error.empty());  // (row 4, remote + to_here, is checked by the end-to-end case)

  const std::string table = format_rpc_bench_table(report);
  CHECK_THAT(table, Catch::Contains("16 MiB FAILED: bench rpc: the echo of a 16777216-byte tensor"));
  const auto results = parse_results(format_rpc_bench_results(report));
  REQUIRE(results.size() == 6);
  CHECK(results[3].at("failed") == "1");
  CHECK(results[3].count("payload_gbs") == 0);
  CHECK(results[4].count("failed") == 0);
  // A failed row misses its target: the 16 MiB echo's is one of the four.
  CHECK_THAT(table, !Catch::Contains("targets met: 4 of 4"));
}

TEST_CASE("calls answered with a remote error are counted and left out of the statistics", "[bench][bench_rpc]") {
  rpc::Registry registry;
  std::atomic<int> n{0};
  registry.add_function("bench.noop", [&n](const rpc::Args&) -> rpc::Value {
    if (++n % 4 == 0) throw std::runtime_error("every fourth call fails");
    return rpc::Value();
  });
  register_rpc_bench_functions(registry);
  AgentJob job(2, registry);
  const RpcBenchOptions o = tiny_options();  // 3 warm-up + 20 timed empty calls, after one checked call
  const RpcBenchReport report = run_rpc_bench_caller(job[0], job[0].worker("worker1"), o);
  REQUIRE(report.rows.size() == 6);
  const RpcBenchRow& empty_row = report.rows[0];
  // Calls 4, 8, ..., 24 fail: the checked first call succeeds, then 6 of the 23 others fail.
  CHECK(empty_row.ran());
  CHECK(empty_row.failed_calls == 6);
  CHECK(empty_row.calls == 15);  // call 4 of the warm-up and 5 of the 20 timed calls failed
  CHECK_THAT(empty_row.error, Catch::Contains("6 of 23 calls failed") && Catch::Contains("every fourth call fails") &&
                                  Catch::Contains("worker1"));
  CHECK(empty_row.p50_us > 0);
  CHECK_THAT(format_rpc_bench_table(report), Catch::Contains("FAILED: 6 of 23 calls failed"));
  const auto results = parse_results(format_rpc_bench_results(report));
  CHECK(results[0].at("failed_calls") == "6");
  CHECK(results[0].count("p50_us") == 1);
  // The async row has no per-call recovery: its failed call ends it.
  CHECK_FALSE(report.rows[5].ran());
  CHECK_THAT(report.rows[5].error, Catch::Contains("every fourth call fails"));
  CHECK(results[5].at("failed") == "1");
}

TEST_CASE("bad options are rejected before any call", "[bench][bench_rpc]") {
  rpc::Registry registry;
  register_rpc_bench_functions(registry);
  AgentJob job(2, registry);
  RpcBenchOptions o = tiny_options();
  o.in_flight = 0;
  CHECK_THROWS_AS(run_rpc_bench_caller(job[0], job[0].worker("worker1"), o), InvalidArgument);
  o = tiny_options();
  o.transport = "carrier-pigeon";
  CHECK_THROWS_AS(run_rpc_bench_caller(job[0], job[0].worker("worker1"), o), InvalidArgument);
}
