// `braid bench ddp`'s table: the two rows, the ratio against braid's target (<= 1.25x), the overlap of
// communication with backward and the per-bucket launch times, and the RESULT line.
#include <fmt/format.h>

#include "bench/ddp/ddp_bench.h"

namespace braid::bench {

namespace {

constexpr double kTargetRatio = 1.25;

std::string row_line(const DdpBenchRow& r) {
  return fmt::format("{:<8} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} | {:>9.2f} {:>9.2f} {:>9.2f}\n", r.name, r.p50,
                     r.mean, r.min, r.max, r.forward, r.backward, r.step);
}

std::string mib(size_t bytes) { return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1 << 20)); }

}  // namespace

std::string format_ddp_bench(const DdpBenchOptions& o, const DdpBenchResult& r) {
  std::string out = fmt::format(
      "# braid bench ddp: {} x (Linear({}, {}) + ReLU), batch {} per rank, float32, MSE, SGD(momentum 0.9)\n"
      "# {} ranks, backend {}{}, bucket_cap_mb {}, gradient_as_bucket_view {}, comm hook {}, {} OpenBLAS thread(s) "
      "per rank\n"
      "# {} timed steps per row after {} warm-up, rows alternating step by step (both ranks run both rows)\n",
      o.layers, o.width, o.width, o.batch, r.size, o.backend,
      o.backend == "gloo" ? fmt::format(" ({} lanes)", o.gloo_threads) : "", o.bucket_cap_mb,
      o.gradient_as_bucket_view, o.comm_hook, o.threads, o.iters, o.warmup);
  out += r.workers;
  if (r.max_abs_diff >= 0) {
    out += fmt::format("# gradient check (DDP on {} slices vs one process on the whole batch): max |diff| {:.3g}\n",
                       r.size, r.max_abs_diff);
  } else {
    out += "# no gradient check: the noop comm hook does not average\n";
  }
  out += fmt::format("{:<8} {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9}   (ms per step, rank 0)\n", "row", "p50",
                     "mean", "min", "max", "fwd+loss", "backward", "sgd step");
  out += row_line(r.single);
  out += row_line(r.ddp);
  const double ratio = r.single.p50 > 0 ? r.ddp.p50 / r.single.p50 : 0;
  out += fmt::format("ddp / single = {:.3f}x (p50; by min {:.3f}x)   target <= {:.2f}x: {}\n", ratio,
                     r.single.min > 0 ? r.ddp.min / r.single.min : 0, kTargetRatio,
                     ratio <= kTargetRatio ? "met" : "MISSED");
  const DdpBenchOverlap& v = r.overlap;
  out += fmt::format(
      "overlap (medians of the DDP logging data): backward compute {:.2f} ms (first to last gradient ready, "
      "the first {:.2f} ms after backward starts), communication {:.2f} ms, of which {:.0f}% while backward was "
      "still computing; {:.2f} ms from the last gradient to the end of backward (waiting, writing back)\n",
      v.backward_compute_ms, v.first_ready_ms, v.comm_ms, 100 * v.overlap_fraction, v.tail_ms);
  out += fmt::format("bucket allreduces through shared memory: {} of {} (the rest went through the engine)\n",
                     v.shared_reductions, v.bucket_reductions);
  out += "bucket  size        launched (ms after backward starts)\n";
  for (size_t b = 0; b < v.launch_ms.size(); ++b) {
    out += fmt::format("{:<7} {:<11} {:.2f}\n", b, b < v.bucket_bytes.size() ? mib(v.bucket_bytes[b]) : "?",
                       v.launch_ms[b]);
  }
  std::string launches;
  for (size_t b = 0; b < v.launch_ms.size(); ++b) launches += fmt::format("{}{:.2f}", b ? "," : "", v.launch_ms[b]);
  out += fmt::format(
      "RESULT ddp backend={} ranks={} layers={} width={} batch={} bucket_cap_mb={} as_view={} hook={} single_p50_ms={:.3f} "
      "single_min_ms={:.3f} ddp_p50_ms={:.3f} ddp_min_ms={:.3f} ratio={:.3f} max_abs_diff={:.3g} "
      "backward_ms={:.3f} ddp_backward_ms={:.3f} comm_ms={:.3f} overlap={:.3f} first_ready_ms={:.3f} tail_ms={:.3f} "
      "buckets={} launch_ms={} shared_reductions={}/{}\n",
      o.backend, r.size, o.layers, o.width, o.batch, o.bucket_cap_mb, o.gradient_as_bucket_view ? 1 : 0,
      o.comm_hook, r.single.p50, r.single.min, r.ddp.p50, r.ddp.min, ratio, r.max_abs_diff, r.single.backward, r.ddp.backward,
      v.comm_ms, v.overlap_fraction, v.first_ready_ms, v.tail_ms, v.launch_ms.size(), launches,
      v.shared_reductions, v.bucket_reductions);
  return out;
}

}  // namespace braid::bench
