// The RPC benchmark behind `braid bench rpc`: two workers, worker0 calling and worker1 serving, over the
// transport `auto` (the default: ucx when built with it), tcp or ucx. bench/torch_rpc.py makes the same calls through PyTorch's TensorPipe agent and
// prints the same table; bench/run_rpc_bench.sh runs both and prints the ratios; docs/PERFORMANCE.md has
// the measured tables.
//
// Measurements (worker0 -> worker1), in this order:
//   empty           rpc_sync of a registered no-op: no arguments, returns none;
//   echo 64 B       rpc_sync of a function returning its argument, a float32 tensor of 16 elements;
//   echo 1 MiB, 16 MiB   the same with larger tensors: payload GB/s = tensor bytes / mean round trip, i.e.
//                   counted one way (the tensor crosses the wire twice per call);
//   remote_to_here  remote() of a function returning a 16-element float32 tensor, then to_here() (the RRef
//                   is dropped after the clock stops: its delete message is not timed, but it still travels
//                   during the next calls, as in a program);
//   socket_echo 1 MiB, 16 MiB   the echo over a plain loopback TCP socket (socket_echo.h), right after the
//                   RPC echoes: the reference for the tcp transport, whose echo rows print their ratio to it
//                   (the tcp transport's goal: >= 0.8x on 16 MiB);
//   async           `async_calls` empty rpc_async calls with `in_flight` outstanding: a new call is issued
//                   each time the oldest completes; calls/s = calls / elapsed time.
// Latency rows time each call alone after `warmup` untimed calls (echo rows of 1 MiB and more: `echo_iters`
// calls after at most 5 warm-up calls) and report min/p50/p99/max/mean (nearest-rank percentiles) of the
// calls that succeeded; a call answered with a remote error is counted as failed and left out. Every
// tensor is made once and reused. Each echo size and the remote value are checked once, outside the
// timing (an echo that comes back different fails its row).
//
// Calls go through the agent's methods (call_sync, call_async, remote, RRef::to_here) with the callee's
// WorkerInfo looked up once: what rpc::rpc_sync(name, ...) does, minus one lookup of the global agent.
//
// Launch: under mpirun the store comes from collectives/mpi's bootstrap (MPI itself); otherwise from
// store::rendezvous (init_method, env:// by default). Exactly 2 processes; worker1 calls rpc::shutdown()
// (graceful) right after init_rpc and so serves until worker0 has finished and shuts down too.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace braid::rpc {
class RpcAgent;
class Registry;
struct WorkerInfo;
}  // namespace braid::rpc

namespace braid::bench {

struct RpcBenchOptions {
  std::string transport = "auto";  // "auto" (ucx when built with it, else tcp), "tcp" or "ucx"
  int iters = 2000;               // timed calls per latency row (empty, echo 64 B, remote + to_here)
  int echo_iters = 50;            // timed calls per large echo row (1 MiB, 16 MiB)
  int warmup = 200;               // untimed calls before each row (large echoes: at most 5)
  int async_calls = 20000;        // timed rpc_async calls
  int in_flight = 64;             // rpc_async calls kept outstanding
  int threads = 8;                // num_worker_threads of each agent
  std::string init_method;        // "" = mpirun's bootstrap under mpirun, else env://
  int timeout_s = 300;            // rpc timeout, join and graceful-shutdown timeout (bounds the whole run)
  // The plain-socket reference's server on 127.0.0.1 (socket_echo.h); run_rpc_bench sets it, 0: no
  // socket_echo rows.
  int socket_port = 0;
};

// One measured row.
struct RpcBenchRow {
  std::string op;     // "empty", "echo", "socket_echo", "remote_to_here", "async"
  int64_t bytes = 0;  // tensor payload of the call (0: none)
  int64_t calls = 0;  // timed calls that succeeded (the statistics are over these)
  bool has_latency = false;  // per-call round trips were timed (not for async)
  double min_us = 0, p50_us = 0, p99_us = 0, max_us = 0;
  double mean_us = 0;       // mean round trip; async: elapsed time / calls
  double calls_per_s = 0;   // 1e6 / mean_us
  double payload_gbs = 0;   // echo, socket_echo: bytes / mean round trip (one way); else 0
  // Calls of a latency row (warm-up or timed) that came back with a RemoteError: the callee answered, so
  // the row went on without them. Any other error ends the row (calls is then 0 and the numbers unset).
  int64_t failed_calls = 0;
  std::string error;  // the first error of the row; empty when every call succeeded
  bool ran() const { return calls > 0; }
};

struct RpcBenchReport {
  std::string transport;         // the transport the agent runs ("tcp", "ucx")
  std::string transport_reason;  // why (rpc/transport.h choose_transport): "asked for", "auto: ..."
  int threads = 0;
  int in_flight = 0;
  std::vector<RpcBenchRow> rows;
};

// min/p50/p99/max/mean of round trips in microseconds; percentiles by nearest rank (the smallest sample
// with at least p% of the samples at or below it). InvalidArgument when `samples_us` is empty.
struct LatencySummary {
  double min_us = 0, p50_us = 0, p99_us = 0, max_us = 0, mean_us = 0;
};
LatencySummary summarize_latencies(std::vector<double> samples_us);
// Fills `row`'s latency columns (min .. mean, has_latency) and calls_per_s from its round trips.
void set_latencies(RpcBenchRow& row, std::vector<double> samples_us);

// braid's latency or throughput target for this row ("p50 <= 40 us", ...; issue 33's, set for the default
// transport) and whether the row meets it; empty for rows without a target (echo 64 B, echo 1 MiB, socket_echo).
struct RpcBenchTarget {
  std::string text;    // for the table: "p50 <= 40 us"
  std::string key;     // for the RESULT line: "p50_us<=40"
  bool met = false;
};
std::optional<RpcBenchTarget> rpc_bench_target(const RpcBenchRow& row);

// An RPC echo row's bandwidth over the plain-socket echo of the same size in `report` (socket_echo.h);
// nullopt when either did not run. The tcp transport's goal is >= kTcpVsSocketGoal on 16 MiB.
inline constexpr double kTcpVsSocketGoal = 0.8;
std::optional<double> socket_ratio(const RpcBenchReport& report, const RpcBenchRow& echo);

// The functions the benchmark calls, registered under "bench.noop", "bench.echo" and "bench.small". Names
// already present are left alone (so that running the benchmark twice in one process works).
void register_rpc_bench_functions(rpc::Registry& registry);

// The caller's side: every measurement from `agent` to `callee` (whose registry has the bench functions),
// each row passed to `on_row` (when given) as soon as it is measured. A row that fails (a call's error, an
// echo that comes back different) or has failed calls records its first error in row.error, and the next
// rows still run. Throws InvalidArgument on bad options.
RpcBenchReport run_rpc_bench_caller(rpc::RpcAgent& agent, const rpc::WorkerInfo& callee, const RpcBenchOptions& o,
                                    const std::function<void(const RpcBenchReport&, const RpcBenchRow&)>& on_row = {});

// The table: a header, one line per row (with its target, or FAILED and the first error), and a count of
// the targets met (a row with an error misses its target). format_rpc_bench_table is the three parts.
std::string format_rpc_bench_header();
std::string format_rpc_bench_row(const RpcBenchReport& report, const RpcBenchRow& row);
std::string format_rpc_bench_footer(const RpcBenchReport& report);
std::string format_rpc_bench_table(const RpcBenchReport& report);
// One machine-readable line per row:
//   RESULT rpc transport=tcp op=empty bytes=0 calls=2000 min_us=.. p50_us=.. p99_us=.. max_us=.. mean_us=..
//          calls_per_s=.. [payload_gbs=..] [vs_socket=..] [in_flight=64] threads=8 [target=p50_us<=40 met=1]
// with failed_calls=N added when some calls failed, and for a row that did not run:
//   RESULT rpc transport=tcp op=.. bytes=.. failed=1
std::string format_rpc_bench_results(const RpcBenchReport& report);

// The whole benchmark on this process (2 processes, see above). Rank 0 passes the preamble, the table
// (row by row) and the RESULT lines to `emit`; rank 1 emits nothing. Returns the report (empty rows on
// rank 1). After both workers have shut down, a row with an error on rank 0 is thrown as braid::Error
// naming it.
RpcBenchReport run_rpc_bench(const RpcBenchOptions& options, const std::function<void(const std::string&)>& emit);

}  // namespace braid::bench
