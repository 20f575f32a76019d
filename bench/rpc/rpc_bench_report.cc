// `braid bench rpc`: latency statistics, braid's targets per row, the table and the RESULT lines.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/check.h"
#include "bench/rpc/rpc_bench.h"

namespace braid::bench {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// Nearest rank: the smallest sample with at least p% of the samples at or below it.
double nearest_rank(const std::vector<double>& sorted, double p) {
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const auto index = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(sorted.size()))) - 1;
  return sorted[index];
}

std::string size_text(int64_t bytes) {
  if (bytes == 0) return "-";
  if (bytes % kMiB == 0) return fmt::format("{} MiB", bytes / kMiB);
  return fmt::format("{} B", bytes);
}

std::string op_text(const RpcBenchReport& report, const RpcBenchRow& row) {
  if (row.op == "empty") return "rpc_sync empty";
  if (row.op == "echo") return "rpc_sync echo";
  if (row.op == "remote_to_here") return "remote+to_here";
  if (row.op == "socket_echo") return "plain socket echo";
  if (row.op == "async") return fmt::format("rpc_async x{} empty", report.in_flight);
  return row.op;
}

// Large echoes are about bandwidth, every other row about calls per second.
bool reports_bandwidth(const RpcBenchRow& row) {
  return (row.op == "echo" || row.op == "socket_echo") && row.bytes >= kMiB;
}

}  // namespace

LatencySummary summarize_latencies(std::vector<double> samples_us) {
  BRAID_CHECK_ARG(!samples_us.empty(), "bench rpc: no latency samples to summarize");
  std::sort(samples_us.begin(), samples_us.end());
  LatencySummary s;
  s.min_us = samples_us.front();
  s.max_us = samples_us.back();
  s.p50_us = nearest_rank(samples_us, 50);
  s.p99_us = nearest_rank(samples_us, 99);
  s.mean_us = std::accumulate(samples_us.begin(), samples_us.end(), 0.0) / static_cast<double>(samples_us.size());
  return s;
}

void set_latencies(RpcBenchRow& row, std::vector<double> samples_us) {
  const LatencySummary sum = summarize_latencies(std::move(samples_us));
  row.has_latency = true;
  row.min_us = sum.min_us;
  row.p50_us = sum.p50_us;
  row.p99_us = sum.p99_us;
  row.max_us = sum.max_us;
  row.mean_us = sum.mean_us;
  row.calls_per_s = 1e6 / sum.mean_us;
}

std::optional<RpcBenchTarget> rpc_bench_target(const RpcBenchRow& row) {
  if (row.op == "empty") return RpcBenchTarget{"p50 <= 40 us", "p50_us<=40", row.p50_us <= 40};
  if (row.op == "remote_to_here") return RpcBenchTarget{"p50 <= 100 us", "p50_us<=100", row.p50_us <= 100};
  if (row.op == "echo" && row.bytes == 16 * kMiB) {
    return RpcBenchTarget{">= 4 GB/s", "payload_gbs>=4", row.payload_gbs >= 4};
  }
  if (row.op == "async") return RpcBenchTarget{">= 100000 calls/s", "calls_per_s>=100000", row.calls_per_s >= 100000};
  return std::nullopt;
}

std::optional<double> socket_ratio(const RpcBenchReport& report, const RpcBenchRow& echo) {
  if (echo.op != "echo" || !echo.ran() || echo.payload_gbs <= 0) return std::nullopt;
  for (const auto& r : report.rows) {
    if (r.op == "socket_echo" && r.bytes == echo.bytes && r.ran() && r.payload_gbs > 0) {
      return echo.payload_gbs / r.payload_gbs;
    }
  }
  return std::nullopt;
}

std::string format_rpc_bench_header() {
  std::string out = "#\n";
  out += fmt::format("# {:<20} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>16}  {}\n", "op", "size", "calls", "min",
                     "p50", "p99", "max", "mean", "throughput", "target (issue 33)");
  out += fmt::format("# {:<20} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8}\n", "", "", "", "(us)", "(us)", "(us)",
                     "(us)", "(us)");
  return out;
}

std::string format_rpc_bench_row(const RpcBenchReport& report, const RpcBenchRow& row) {
  if (!row.ran()) {
    return fmt::format("  {:<20} {:>6} FAILED: {}\n", op_text(report, row), size_text(row.bytes), row.error);
  }
  const auto lat = [&](double v) { return row.has_latency ? fmt::format("{:.1f}", v) : std::string("-"); };
  const std::string throughput = reports_bandwidth(row) ? fmt::format("{:.3f} GB/s", row.payload_gbs)
                                                        : fmt::format("{:.0f} calls/s", row.calls_per_s);
  std::string target;
  if (!row.error.empty()) {
    target = "  FAILED: " + row.error;  // some calls failed: the numbers are of the others
  } else if (const auto t = rpc_bench_target(row)) {
    target = fmt::format("  {}: {}", t->text, t->met ? "met" : "MISSED");
  }
  return fmt::format("  {:<20} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8.1f} {:>16}{}\n", op_text(report, row),
                     size_text(row.bytes), row.calls, lat(row.min_us), lat(row.p50_us), lat(row.p99_us),
                     lat(row.max_us), row.mean_us, throughput, target);
}

std::string format_rpc_bench_footer(const RpcBenchReport& report) {
  int met = 0, targets = 0;
  std::string out;
  for (const auto& row : report.rows) {
    if (const auto t = rpc_bench_target(row)) {
      ++targets;
      met += t->met && row.error.empty() ? 1 : 0;
    }
    // The echo rows next to the kernel's TCP on the same machine, in the same run; the goal is the tcp
    // transport's (ucx on one host does not use TCP, and may beat it).
    if (const auto ratio = socket_ratio(report, row)) {
      out += fmt::format("# {} echo {} / plain socket echo: {:.2f}x", report.transport, size_text(row.bytes), *ratio);
      if (report.transport == "tcp" && row.bytes == 16 * kMiB) {
        out += fmt::format(" (tcp goal >= {:.1f}x: {})", kTcpVsSocketGoal,
                           *ratio >= kTcpVsSocketGoal && row.error.empty() ? "met" : "MISSED");
      }
      out += "\n";
    }
  }
  return out + fmt::format("# targets met: {} of {} (issue 33's, for the default transport)\n", met, targets);
}

std::string format_rpc_bench_table(const RpcBenchReport& report) {
  std::string out = format_rpc_bench_header();
  for (const auto& row : report.rows) out += format_rpc_bench_row(report, row);
  return out + format_rpc_bench_footer(report);
}

std::string format_rpc_bench_results(const RpcBenchReport& report) {
  std::string out;
  for (const auto& row : report.rows) {
    out += fmt::format("RESULT rpc transport={} op={} bytes={}", report.transport, row.op, row.bytes);
    if (!row.ran()) {
      out += " failed=1\n";
      continue;
    }
    out += fmt::format(" calls={}", row.calls);
    if (row.has_latency) {
      out += fmt::format(" min_us={:.2f} p50_us={:.2f} p99_us={:.2f} max_us={:.2f}", row.min_us, row.p50_us,
                         row.p99_us, row.max_us);
    }
    out += fmt::format(" mean_us={:.2f} calls_per_s={:.1f}", row.mean_us, row.calls_per_s);
    if (row.op == "echo" || row.op == "socket_echo") out += fmt::format(" payload_gbs={:.4f}", row.payload_gbs);
    if (const auto ratio = socket_ratio(report, row)) out += fmt::format(" vs_socket={:.4f}", *ratio);
    if (row.op == "async") out += fmt::format(" in_flight={}", report.in_flight);
    out += fmt::format(" threads={}", report.threads);
    if (row.failed_calls > 0) out += fmt::format(" failed_calls={}", row.failed_calls);
    if (const auto t = rpc_bench_target(row)) out += fmt::format(" target={} met={}", t->key, t->met ? 1 : 0);
    out += "\n";
  }
  return out;
}

}  // namespace braid::bench
