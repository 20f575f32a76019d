// `braid bench rpc`: the measurements (the caller's side) and the launch of the two workers. The
// statistics and the table are in rpc_bench_report.cc.
#include "bench/rpc/rpc_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>

#include "base/check.h"
#include "base/logging.h"
#include "bench/bench_job.h"
#include "bench/rpc/socket_echo.h"
#include "rpc/api.h"
#include "store/store.h"
#include "tensor/factory.h"

namespace braid::bench {
namespace {

using BenchClock = std::chrono::steady_clock;
constexpr int64_t kSmallElements = 16;  // 64 bytes of float32
constexpr int kLargeWarmup = 5;         // at most this many untimed calls before a large echo row
constexpr const char* kNoop = "bench.noop";
constexpr const char* kEcho = "bench.echo";
constexpr const char* kSmall = "bench.small";

std::shared_ptr<spdlog::logger> logger() { return logging::get("braid.bench"); }

double micros_since(BenchClock::time_point t0) {
  return std::chrono::duration<double, std::micro>(BenchClock::now() - t0).count();
}

// A float32 tensor of `elements` whose values are a formula of the index (so a wrong echo shows).
Tensor pattern_tensor(int64_t elements) {
  Tensor t = empty({elements}, DType::Float32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < elements; ++i) p[i] = static_cast<float>(i % 1009) - 500.0f;
  return t;
}

// Elements of `got` that differ from `sent` (all of them when the shapes or types differ).
int64_t count_wrong(const Tensor& sent, const rpc::Value& got) {
  if (!got.is(rpc::Value::Kind::Tensor)) return sent.numel();
  const Tensor& t = got.as_tensor();
  if (t.dtype() != sent.dtype() || t.numel() != sent.numel() || !t.is_contiguous()) return sent.numel();
  const float* a = sent.data<float>();
  const float* b = t.data<float>();
  if (std::memcmp(a, b, sent.nbytes()) == 0) return 0;
  int64_t wrong = 0;
  for (int64_t i = 0; i < sent.numel(); ++i) wrong += a[i] != b[i] ? 1 : 0;
  return wrong;
}

// A latency row: `warmup` untimed calls, then `iters` calls each timed alone; `after` runs after each
// call, outside the timing. A call answered with a RemoteError counts in failed_calls and the row goes on
// (the callee is alive and answering); any other error ends the row, as does a row without one success.
template <class Call, class After>
RpcBenchRow time_each(std::string op, int64_t bytes, int warmup, int iters, Call&& call, After&& after) {
  RpcBenchRow row;
  row.op = std::move(op);
  row.bytes = bytes;
  const auto failed = [&](const RemoteError& e) {
    if (row.failed_calls++ == 0) row.error = e.what();
    after();
  };
  for (int i = 0; i < warmup; ++i) {
    try {
      call();
      after();
    } catch (const RemoteError& e) {
      failed(e);
    }
  }
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    const auto t0 = BenchClock::now();
    try {
      call();
    } catch (const RemoteError& e) {
      failed(e);
      continue;
    }
    samples.push_back(micros_since(t0));
    after();
  }
  BRAID_CHECK_TYPED(Error, !samples.empty(), "all {} calls failed; the first: {}", warmup + iters, row.error);
  row.calls = static_cast<int64_t>(samples.size());
  if (row.failed_calls > 0) {
    row.error = fmt::format("{} of {} calls failed; the first: {}", row.failed_calls, warmup + iters, row.error);
  }
  set_latencies(row, std::move(samples));
  return row;
}

struct Caller {
  rpc::RpcAgent& agent;
  const rpc::WorkerInfo& callee;
  const RpcBenchOptions& o;

  RpcBenchRow empty_call() {
    auto call = [&] { return agent.call_sync(callee, kNoop, {}); };
    const rpc::Value first = call();
    BRAID_CHECK_TYPED(InternalError, first.is_none(), "bench rpc: {} on '{}' returned {} instead of none", kNoop,
                      callee.name, first.describe());
    return time_each("empty", 0, o.warmup, o.iters, call, [] {});
  }

  RpcBenchRow echo(int64_t elements) {
    const Tensor t = pattern_tensor(elements);
    const rpc::Args args{rpc::Value(t)};
    auto call = [&] { return agent.call_sync(callee, kEcho, args); };
    const int64_t wrong = count_wrong(t, call());  // checked once, outside the timing
    BRAID_CHECK_TYPED(InternalError, wrong == 0,
                      "bench rpc: the echo of a {}-byte tensor from '{}' came back with {} of {} elements wrong",
                      t.nbytes(), callee.name, wrong, elements);
    const bool large = elements > kSmallElements;
    RpcBenchRow row = time_each("echo", static_cast<int64_t>(t.nbytes()),
                                large ? std::min(o.warmup, kLargeWarmup) : o.warmup, large ? o.echo_iters : o.iters,
                                call, [] {});
    row.payload_gbs = static_cast<double>(row.bytes) / (row.mean_us * 1e3);
    return row;
  }

  RpcBenchRow remote_to_here() {
    auto call = [&] {
      const rpc::RRef r = agent.remote(callee, kSmall, {});
      return r.to_here();
    };
    const rpc::Value first = call();
    BRAID_CHECK_TYPED(InternalError,
                      first.is(rpc::Value::Kind::Tensor) && first.as_tensor().numel() == kSmallElements,
                      "bench rpc: to_here() of {} on '{}' returned {} instead of a tensor of {} elements", kSmall,
                      callee.name, first.describe(), kSmallElements);
    // Each RRef is dropped after the clock has stopped: its delete message is sent untimed.
    rpc::RRef held;
    return time_each(
        "remote_to_here", kSmallElements * 4, o.warmup, o.iters,
        [&] {
          held = agent.remote(callee, kSmall, {});
          return held.to_here();
        },
        [&] { held = rpc::RRef(); });
  }

  // `calls` empty rpc_async calls with `in_flight` outstanding; returns the elapsed microseconds.
  double async_window(int calls) {
    const auto n = static_cast<size_t>(o.in_flight);
    std::vector<Future<rpc::Value>> window(n);
    const auto t0 = BenchClock::now();
    size_t issued = 0, done = 0;
    const auto total = static_cast<size_t>(calls);
    const std::chrono::milliseconds timeout(int64_t{o.timeout_s} * 1000);
    while (done < total) {
      for (; issued < total && issued - done < n; ++issued) window[issued % n] = agent.call_async(callee, kNoop, {});
      window[done % n].value(timeout);  // rethrows a failed call
      ++done;
    }
    return micros_since(t0);
  }

  RpcBenchRow async_calls() {
    async_window(std::max(o.warmup, o.in_flight));
    const double elapsed_us = async_window(o.async_calls);
    RpcBenchRow row;
    row.op = "async";
    row.calls = o.async_calls;
    row.mean_us = elapsed_us / o.async_calls;
    row.calls_per_s = 1e6 / row.mean_us;
    return row;
  }
};

void check_options(const RpcBenchOptions& o) {
  BRAID_CHECK_ARG(o.transport == "auto" || o.transport == "tcp" || o.transport == "ucx",
                  "bench rpc: unknown transport '{}' (auto, tcp or ucx)", o.transport);
  BRAID_CHECK_ARG(o.iters >= 1 && o.echo_iters >= 1 && o.async_calls >= 1 && o.in_flight >= 1 && o.threads >= 1 &&
                      o.timeout_s >= 1 && o.warmup >= 0,
                  "bench rpc: --iters, --echo-iters, --async-calls, --in-flight, --threads and --timeout must be "
                  "positive and --warmup not negative (iters {}, echo-iters {}, async-calls {}, in-flight {}, "
                  "threads {}, timeout {}, warmup {})",
                  o.iters, o.echo_iters, o.async_calls, o.in_flight, o.threads, o.timeout_s, o.warmup);
}

std::string preamble(const RpcBenchOptions& o, const BenchJob& job, const rpc::RpcAgent& agent,
                     const std::string& who) {
  std::string out = fmt::format("# braid bench rpc: transport {} (--transport {}: {}), 2 workers (launcher {}): "
                                "worker0 calls, worker1 serves; {} worker threads each\n",
                                agent.transport_name(), o.transport, agent.transport_reason(), job.launcher, o.threads);
  out += who;
  out += fmt::format("# latency rows: {} warm-up calls, then {} calls each timed alone (large echoes: {} warm-up, {} "
                     "timed); percentiles by nearest rank\n",
                     o.warmup, o.iters, std::min(o.warmup, kLargeWarmup), o.echo_iters);
  out += "# echo payload GB/s = tensor bytes / mean round trip, counted one way (the tensor crosses the wire twice "
         "per call)\n";
  out += "# plain socket echo: the same echo over one blocking loopback TCP socket (no braid framing), the tcp "
         "transport's reference\n";
  out += fmt::format("# async: {} empty rpc_async calls with {} in flight (a new call each time the oldest "
                     "completes); calls/s = calls / elapsed\n",
                     o.async_calls, o.in_flight);
  return out;
}

}  // namespace

void register_rpc_bench_functions(rpc::Registry& registry) {
  if (!registry.find_function(kNoop)) registry.add_function(kNoop, [](const rpc::Args&) { return rpc::Value(); });
  if (!registry.find_function(kEcho)) {
    registry.add_function(kEcho, [](const rpc::Args& a) -> rpc::Value { return a.at(0); });
  }
  if (!registry.find_function(kSmall)) {
    const Tensor small = pattern_tensor(kSmallElements);
    registry.add_function(kSmall, [small](const rpc::Args&) -> rpc::Value { return small; });
  }
}

RpcBenchReport run_rpc_bench_caller(rpc::RpcAgent& agent, const rpc::WorkerInfo& callee, const RpcBenchOptions& o,
                                    const std::function<void(const RpcBenchReport&, const RpcBenchRow&)>& on_row) {
  check_options(o);
  Caller c{agent, callee, o};
  RpcBenchReport report;
  report.transport = agent.transport_name();
  report.transport_reason = agent.transport_reason();
  report.threads = o.threads;
  report.in_flight = o.in_flight;
  // One row: its measurement, or the error that stopped it (the rows are independent).
  const auto run = [&](std::string op, int64_t bytes, const std::function<RpcBenchRow()>& measure) {
    RpcBenchRow row;
    try {
      row = measure();
    } catch (const std::exception& e) {
      row = RpcBenchRow{};
      row.op = std::move(op);
      row.bytes = bytes;
      row.error = e.what();
      logger()->error("bench rpc: {} of {} bytes failed: {}", row.op, row.bytes, row.error);
    }
    report.rows.push_back(std::move(row));
    if (on_row) on_row(report, report.rows.back());
  };
  run("empty", 0, [&] { return c.empty_call(); });
  for (int64_t elements : {kSmallElements, int64_t{1} << 18, int64_t{1} << 22}) {  // 64 B, 1 MiB, 16 MiB
    run("echo", elements * 4, [&] { return c.echo(elements); });
  }
  if (o.socket_port > 0) {
    for (int64_t bytes : {int64_t{1} << 20, int64_t{16} << 20}) {
      run("socket_echo", bytes,
          [&] { return socket_echo_row(o.socket_port, bytes, std::min(o.warmup, kLargeWarmup), o.echo_iters); });
    }
  }
  run("remote_to_here", kSmallElements * 4, [&] { return c.remote_to_here(); });
  run("async", 0, [&] { return c.async_calls(); });
  return report;
}

RpcBenchReport run_rpc_bench(const RpcBenchOptions& o, const std::function<void(const std::string&)>& emit) {
  check_options(o);
  const BenchJob job =
      join_two_process_bench("rpc", "worker0 calls, worker1 serves", o.init_method, o.timeout_s);
  publish_bench_worker(job, "bench/rpc/who");
  // worker1 serves the plain-socket reference while it serves RPC; worker0 learns its port.
  std::optional<SocketEchoServer> socket_server;
  RpcBenchOptions opts = o;
  if (job.rank == 1) {
    socket_server.emplace();
    job.store->set("bench/rpc/socket_port", store::to_bytes(std::to_string(socket_server->port())));
  } else {
    opts.socket_port = std::stoi(store::to_string(
        job.store->get("bench/rpc/socket_port", std::chrono::milliseconds(int64_t{o.timeout_s} * 1000))));
  }

  register_rpc_bench_functions(rpc::global_registry());
  rpc::RpcBackendOptions options;
  options.transport = o.transport;
  options.num_worker_threads = o.threads;
  options.rpc_timeout = std::chrono::milliseconds(int64_t{o.timeout_s} * 1000);
  options.join_timeout = options.rpc_timeout;
  options.store = job.store;
  rpc::init_rpc(fmt::format("worker{}", job.rank), job.rank, job.size, options);

  RpcBenchReport report;
  if (job.rank != 0) {
    rpc::shutdown(true);  // serves until worker0 shuts down as well
    return report;
  }
  try {
    emit(preamble(o, job, rpc::current_agent(), read_bench_workers(job, "bench/rpc/who")) +
         format_rpc_bench_header());
    report = run_rpc_bench_caller(rpc::current_agent(), rpc::get_worker_info("worker1"), opts,
                                  [&](const RpcBenchReport& r, const RpcBenchRow& row) {
                                    emit(format_rpc_bench_row(r, row));
                                  });
  } catch (...) {
    // worker1 waits in its graceful shutdown: join it there so that it ends now, then report the failure.
    try {
      rpc::shutdown(true);
    } catch (const std::exception& e) {
      logger()->warn("bench rpc: shutdown after a failed run failed too: {}", e.what());
    }
    throw;
  }
  rpc::shutdown(true);
  emit(format_rpc_bench_footer(report) + format_rpc_bench_results(report));
  const auto bad = [](const RpcBenchRow& r) { return !r.error.empty(); };
  const auto first = std::find_if(report.rows.begin(), report.rows.end(), bad);
  if (first != report.rows.end()) {
    BRAID_THROW(Error, "bench rpc over {}: {} of {} rows failed or had failed calls; the first, {} of {} bytes: {}",
                report.transport, std::count_if(report.rows.begin(), report.rows.end(), bad), report.rows.size(), first->op,
                first->bytes, first->error);
  }
  return report;
}

}  // namespace braid::bench
