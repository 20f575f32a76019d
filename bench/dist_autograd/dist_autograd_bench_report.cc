// `braid bench dist-autograd`: iteration statistics, the ratio against braid's target (<= 1.15x), the table and
// the RESULT lines. bench/torch_dist_autograd.py prints the same table for PyTorch.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/check.h"
#include "bench/dist_autograd/dist_autograd_bench.h"

namespace braid::bench {
namespace {

// Nearest rank: the smallest sample with at least p% of the samples at or below it.
double nearest_rank(const std::vector<double>& sorted, double p) {
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const auto index = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(sorted.size()))) - 1;
  return sorted[index];
}

const DistAutogradBenchRow* find_row(const DistAutogradBenchReport& report, const std::string& mode) {
  for (const auto& row : report.rows) {
    if (row.mode == mode) return &row;
  }
  return nullptr;
}

std::string size_text(int64_t bytes) {
  if (bytes % (int64_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

}  // namespace

DistAutogradBenchRow summarize_iterations(std::string mode, std::vector<double> samples_ms) {
  BRAID_CHECK_ARG(!samples_ms.empty(), "bench dist-autograd: no iteration times to summarize ({} row)", mode);
  std::sort(samples_ms.begin(), samples_ms.end());
  DistAutogradBenchRow row;
  row.mode = std::move(mode);
  row.iters = static_cast<int64_t>(samples_ms.size());
  row.min_ms = samples_ms.front();
  row.max_ms = samples_ms.back();
  row.p50_ms = nearest_rank(samples_ms, 50);
  row.mean_ms = std::accumulate(samples_ms.begin(), samples_ms.end(), 0.0) / static_cast<double>(samples_ms.size());
  return row;
}

double DistAutogradTimeline::total_ms() const {
  double total = 0;
  for (const auto& seg : segments) total += seg.mean_ms;
  return total;
}

const DistAutogradSegment& DistAutogradTimeline::at(const std::string& key) const {
  for (const auto& seg : segments) {
    if (seg.key == key) return seg;
  }
  for (const auto& seg : aside) {
    if (seg.key == key) return seg;
  }
  BRAID_THROW(InvalidArgument, "bench dist-autograd: the timeline has no segment '{}'", key);
}

std::optional<double> DistAutogradBenchReport::ratio() const {
  const DistAutogradBenchRow* local = find_row(*this, "local");
  const DistAutogradBenchRow* dist = find_row(*this, "distributed");
  if (local == nullptr || dist == nullptr || local->p50_ms <= 0) return std::nullopt;
  return dist->p50_ms / local->p50_ms;
}

std::optional<double> DistAutogradBenchReport::ratio_min() const {
  const DistAutogradBenchRow* local = find_row(*this, "local");
  const DistAutogradBenchRow* dist = find_row(*this, "distributed");
  if (local == nullptr || dist == nullptr || local->min_ms <= 0) return std::nullopt;
  return dist->min_ms / local->min_ms;
}

std::string format_dist_autograd_bench_header(const DistAutogradBenchOptions& o) {
  const int64_t tensor_bytes = o.batch * o.features * 4;
  std::string out = fmt::format("# model: Linear({0}, {0}) with bias, x ({1}, {0}) float32 requiring grad; {2} "
                                "OpenBLAS thread(s) per process, {3} RPC threads per agent\n",
                                o.features, o.batch, o.threads, o.rpc_threads);
  out += fmt::format("# {} timed iterations per row after {} warm-up, local and distributed alternating; p50 by "
                     "nearest rank\n",
                     o.iters, o.warmup);
  out += fmt::format("# distributed: 4 tensors of {} cross the wire per iteration (x, out, d out, d x), then the "
                     "release; phases are means\n",
                     size_text(tensor_bytes));
  out += "#\n";
  out += fmt::format("# {:<12} {:>5} {:>8} {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} {:>8}\n", "mode", "iters", "mean",
                     "p50", "min", "max", "forward", "backward", "grads", "release");
  out += fmt::format("# {:<12} {:>5} {:>8} {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} {:>8}\n", "", "", "(ms)", "(ms)",
                     "(ms)", "(ms)", "(ms)", "(ms)", "(ms)", "(ms)");
  return out;
}

std::string format_dist_autograd_bench_row(const DistAutogradBenchRow& row) {
  const bool dist = row.mode == "distributed";
  const auto phase = [&](double v) { return dist ? fmt::format("{:.3f}", v) : std::string("-"); };
  return fmt::format("  {:<12} {:>5} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} | {:>8.3f} {:>8.3f} {:>8} {:>8}\n", row.mode,
                     row.iters, row.mean_ms, row.p50_ms, row.min_ms, row.max_ms, row.forward_ms, row.backward_ms,
                     phase(row.gradients_ms), phase(row.release_ms));
}

std::string format_dist_autograd_bench_footer(const DistAutogradBenchReport& report) {
  const auto r = report.ratio();
  if (!r) return "# distributed / local: - (a row is missing)\n";
  const DistAutogradBenchRow* local = find_row(report, "local");
  const DistAutogradBenchRow* dist = find_row(report, "distributed");
  return fmt::format("# distributed / local (p50): {:.3f}x (mean {:.3f}x, min {:.3f}x); target <= {:.2f}x: {}\n", *r,
                     dist->mean_ms / local->mean_ms, *report.ratio_min(), kDistAutogradTargetRatio,
                     *r <= kDistAutogradTargetRatio ? "met" : "MISSED");
}

std::string format_dist_autograd_bench_table(const DistAutogradBenchReport& report,
                                             const DistAutogradBenchOptions& o) {
  std::string out = format_dist_autograd_bench_header(o);
  for (const auto& row : report.rows) out += format_dist_autograd_bench_row(row);
  return out + format_dist_autograd_bench_footer(report);
}

std::string format_dist_autograd_bench_results(const DistAutogradBenchReport& report) {
  std::string out;
  const auto r = report.ratio();
  for (const auto& row : report.rows) {
    out += fmt::format("RESULT dist_autograd transport={} mode={} batch={} features={} iters={} mean_ms={:.4f} "
                       "p50_ms={:.4f} min_ms={:.4f} max_ms={:.4f} forward_ms={:.4f} backward_ms={:.4f}",
                       report.transport, row.mode, report.batch, report.features, row.iters, row.mean_ms, row.p50_ms,
                       row.min_ms, row.max_ms, row.forward_ms, row.backward_ms);
    if (row.mode == "distributed") {
      out += fmt::format(" gradients_ms={:.4f} release_ms={:.4f}", row.gradients_ms, row.release_ms);
    }
    out += fmt::format(" threads={} rpc_threads={}", report.threads, report.rpc_threads);
    if (row.mode == "distributed" && r) {
      out += fmt::format(" ratio={:.4f} ratio_min={:.4f} target=ratio<={:.2f} met={}", *r, *report.ratio_min(),
                         kDistAutogradTargetRatio, *r <= kDistAutogradTargetRatio ? 1 : 0);
    }
    out += "\n";
  }
  return out;
}

std::string format_dist_autograd_timeline(const DistAutogradBenchReport& report) {
  if (!report.timeline) return report.timeline_note.empty() ? "" : "# " + report.timeline_note + "\n";
  const DistAutogradTimeline& t = *report.timeline;
  const double total = t.total_ms();
  std::string out = fmt::format("#\n# where the time goes: {} more distributed iterations, traced (timestamps on both "
                                "workers, one clock):\n",
                                t.iters);
  out += fmt::format("#   {:<30} {:<8} {:>8} {:>6} {:>8}\n", "segment", "where", "mean", "", "p50");
  const auto line = [&](const DistAutogradSegment& seg, bool share) {
    out += fmt::format("#   {:<30} {:<8} {:>8.3f} {:>6} {:>8.3f}\n", seg.what, seg.where, seg.mean_ms,
                       share && total > 0 ? fmt::format("{:.1f}%", 100 * seg.mean_ms / total) : "", seg.p50_ms);
  };
  for (const auto& seg : t.segments) line(seg, true);
  out += fmt::format("#   {:<30} {:<8} {:>8.3f} (ms)\n", "iteration", "", total);
  out += "#   beside the path:\n";
  for (const auto& seg : t.aside) line(seg, false);
  std::string means, p50s;
  for (const auto& seg : t.segments) {
    means += fmt::format(" {}_ms={:.4f}", seg.key, seg.mean_ms);
    p50s += fmt::format(" {}_p50_ms={:.4f}", seg.key, seg.p50_ms);
  }
  means += fmt::format(" total_ms={:.4f}", total);
  for (const auto& seg : t.aside) {
    means += fmt::format(" {}_ms={:.4f}", seg.key, seg.mean_ms);
    p50s += fmt::format(" {}_p50_ms={:.4f}", seg.key, seg.p50_ms);
  }
  out += fmt::format("RESULT dist_autograd_timeline transport={} iters={}{}{}\n", report.transport, t.iters, means, p50s);
  return out;
}

}  // namespace braid::bench
