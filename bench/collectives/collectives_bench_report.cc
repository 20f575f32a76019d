#include "bench/collectives/collectives_bench_report.h"

#include <fmt/format.h>

#include <fstream>

namespace braid::bench {

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

std::string format_bytes(int64_t bytes) {
  if (bytes % (int64_t{1} << 30) == 0) return fmt::format("{}G", bytes >> 30);
  if (bytes % kMiB == 0) return fmt::format("{}M", bytes >> 20);
  if (bytes % 1024 == 0) return fmt::format("{}K", bytes >> 10);
  return std::to_string(bytes);
}

std::string tcp_congestion_control() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_congestion_control");
  std::string name;
  if (!(in >> name)) name = "unknown";
  return name;
}

}  // namespace

std::string op_row(BenchOp op, DType dtype, const CollectivesBenchRow& r) {
  const bool reduces = op == BenchOp::Allreduce || op == BenchOp::ReduceScatter;
  std::string raw = "        -       -         -         -";
  if (r.raw_time_us) {
    raw = fmt::format("{:>9.1f} {:>7.3f} {:>8.3f}x {:>8.3f}x", *r.raw_time_us, *r.raw_busbw_gbs,
                      r.time_us / *r.raw_time_us, *r.paired_ratio);
  }
  const std::string raw_cpu = r.raw_cpu_us ? fmt::format("{:.1f}", *r.raw_cpu_us) : std::string("-");
  return fmt::format("{:>12} {:>11} {:>9} {:>5} {:>4} {:>10.1f} {:>7.3f} {:>7.3f} {:>6} {} {:>8} {:>9.1f} {:>9}\n",
                     r.bytes, r.count, dtype_name(dtype), reduces ? "sum" : "none", op == BenchOp::Broadcast ? 0 : -1,
                     r.time_us, r.algbw_gbs, r.busbw_gbs, r.wrong < 0 ? std::string("n/a") : std::to_string(r.wrong),
                     raw, r.iters, r.cpu_us, raw_cpu);
}

std::string op_header(const CollectivesBenchOptions& o, int ranks, BenchOp op, const std::string& raw_name,
                      const std::string& hierarchy) {
  std::string out = fmt::format("#\n# op {}: braid {} on a {} group of {} ranks (two levels: {})", bench_op_name(op),
                                op == BenchOp::Allgather       ? "allgather_into_tensor"
                                : op == BenchOp::ReduceScatter ? "reduce_scatter_tensor"
                                : op == BenchOp::Alltoall      ? "alltoall_single"
                                                               : bench_op_name(op),
                                o.backend, ranks, hierarchy);
  out += raw_name.empty() ? "; no raw reference for this dtype\n" : fmt::format(" vs raw {}\n", raw_name);
  out += "#\n";
  out += fmt::format("# {:>10} {:>11} {:>9} {:>5} {:>4} {:>10} {:>7} {:>7} {:>6} {:>9} {:>7} {:>9} {:>9} {:>8} {:>9} "
                     "{:>9}\n",
                     "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "raw time", "raw bus",
                     "braid/raw", "paired", "iters", "cpu/call", "raw cpu");
  out += fmt::format("# {:>10} {:>11} {:>9} {:>5} {:>4} {:>10} {:>7} {:>7} {:>6} {:>9} {:>7} {:>9} {:>9} {:>8} {:>9} "
                     "{:>9}\n",
                     "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(best)",
                     "(median)", "per round", "(us)", "(us)");
  return out;
}

std::string op_summary(const CollectivesBenchOptions& o, int ranks, const CollectivesBenchTable& t) {
  int64_t wrong = 0;
  bool checked = true;
  double busbw = 0, raw_busbw = 0, worst_large = 0, worst_large_paired = 0;
  int raw_rows = 0;
  for (const auto& r : t.rows) {
    checked = checked && r.wrong >= 0;
    wrong += std::max<int64_t>(r.wrong, 0);
    busbw += r.busbw_gbs;
    if (r.raw_time_us) {
      raw_busbw += *r.raw_busbw_gbs;
      ++raw_rows;
      if (r.requested_bytes >= kMiB) {
        worst_large = std::max(worst_large, r.time_us / *r.raw_time_us);
        worst_large_paired = std::max(worst_large_paired, *r.paired_ratio);
      }
    }
  }
  const auto& small = t.rows.front();
  const double n = static_cast<double>(t.rows.size());
  std::string out = checked ? fmt::format("# Out of bounds values : {} {}\n", wrong, wrong == 0 ? "OK" : "FAILED")
                            : "# Out of bounds values : not checked (--no-check)\n";
  out += fmt::format("# Avg bus bandwidth    : {:.3f} GB/s", busbw / n);
  if (raw_rows > 0) out += fmt::format(" (raw {:.3f} GB/s)", raw_busbw / raw_rows);
  out += "\n";
  // hier_ops: rank 0's ops through the two-level engine in this table (0: the flat engines ran them all).
  out += fmt::format("# Two levels: {}; rank 0 ran {} ops of this table through the two-level engine\n", t.hierarchy,
                     t.hier_ops);
  std::string result = fmt::format("RESULT collectives backend={} op={} ranks={} dtype={} sizes={} wrong={} avg_busbw={:.4f}"
                                   " hierarchy={} hier_ops={}",
                                   o.backend, bench_op_name(t.op), ranks, o.dtype, t.rows.size(),
                                   checked ? std::to_string(wrong) : std::string("unchecked"), busbw / n, t.hierarchy,
                                   t.hier_ops);
  if (raw_rows > 0) {
    result += fmt::format(" raw={} raw_avg_busbw={:.4f}", t.raw_name, raw_busbw / raw_rows);
    if (small.raw_time_us) {
      out += fmt::format("# Overhead at {} B: {:.1f} us per call (braid {:.1f} us, raw {:.1f} us; paired median "
                         "{:.1f} us)\n",
                         small.bytes, small.time_us - *small.raw_time_us, small.time_us, *small.raw_time_us,
                         *small.paired_overhead_us);
      result += fmt::format(" small_bytes={} small_overhead_us={:.2f} small_paired_overhead_us={:.2f}", small.bytes,
                            small.time_us - *small.raw_time_us, *small.paired_overhead_us);
      out += fmt::format("# CPU per call at {} B, all ranks: braid {:.1f} us, raw {:.1f} us\n", small.bytes,
                         small.cpu_us, *small.raw_cpu_us);
      result += fmt::format(" small_cpu_us={:.2f} small_raw_cpu_us={:.2f}", small.cpu_us, *small.raw_cpu_us);
    }
    if (worst_large > 0) {
      out += fmt::format("# Worst braid/raw at >= 1 MiB: {:.3f}x (paired median {:.3f}x)\n", worst_large,
                         worst_large_paired);
      result += fmt::format(" max_ratio_ge_1MiB={:.4f} max_paired_ratio_ge_1MiB={:.4f}", worst_large,
                            worst_large_paired);
    }
  } else {
    result += " raw=none";
  }
  return out + result + "\n";
}

// The kernel's default TCP congestion control, which gloo's connections get ("unknown" where unreadable).
// It matters to gloo rows: on loopback under bbr, the connections of one lane of two, idle between its
// ops, ran 1 MiB alltoalls up to 1.7x slower than under cubic (docs/PERFORMANCE.md).

std::string preamble(const CollectivesBenchOptions& o, int ranks, const std::string& launcher,
                     const std::vector<int64_t>& sizes) {
  std::string out = fmt::format("# braid bench collectives: backend {}, {} ranks (launcher {}), dtype {}, sizes {}..{} "
                                "({} sizes)\n",
                                o.backend, ranks, launcher, o.dtype, format_bytes(sizes.front()),
                                format_bytes(sizes.back()), sizes.size());
  out += fmt::format("# per size: {} warm-up calls per side, then {} rounds of {} calls per side (sides alternate "
                     "first); time = best round of the slowest rank's mean per call; {}\n",
                     o.warmup, o.rounds,
                     o.iters > 0 ? std::to_string(o.iters)
                                 : fmt::format("about {:g} s per size in all, at least {}", o.seconds_per_size,
                                               o.min_iters),
                     o.check ? "#wrong checked once per size, outside timing" : "no check");
  out += "# cpu/call: CPU time per call of each side's whole process (every thread), summed over ranks: its time when "
         "ranks share cores\n";
  if (o.backend == "gloo") {
    out += fmt::format("# gloo group: {} lanes (--threads); TCP congestion control: {}\n", o.threads,
                       tcp_congestion_control());
  }
  if (o.poll_wait) out += "# braid side waits by polling Work::is_completed() (--poll-wait)\n";
  if (o.raw_nonblocking) out += "# raw side: nonblocking MPI calls + MPI_Wait (--raw-nonblocking)\n";
  return out;
}

}  // namespace braid::bench
