// `braid bench trace` (trace_bench.h).
#include "bench/trace/trace_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "base/check.h"
#include "bench/bench_job.h"
#include "bench/bench_stats.h"
#include "collectives/queue/flight_recorder.h"
#include "collectives/registry/engine_factory.h"
#include "store/prefix_store.h"
#include "tensor/factory.h"

namespace braid::bench {

namespace {

using Clock = std::chrono::steady_clock;

struct Variant {
  const char* name;
  size_t trace_buffer;
  bool desync;
  std::shared_ptr<collectives::ProcessGroup> group;
  std::vector<double> us_per_op;  // one per round
};

double time_allreduces(collectives::ProcessGroup& g, Tensor& t, int n) {
  collectives::TensorList ts{t};
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) g.allreduce(ts)->wait();
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n;
}

// The recorder alone: what an op pays on the issuing and running threads.
double recorder_ns_per_op(int64_t iters) {
  collectives::FlightRecorder rec({0, 1, "micro"}, "none", 2000);
  const collectives::TraceIo io{1, 1, DType::Float32};
  const auto t0 = Clock::now();
  // The group passes the times it read anyway (issue, start); the end is the recorder's own reading.
  const auto given = Clock::now();
  for (int64_t seq = 1; seq <= iters; ++seq) {
    rec.scheduled(static_cast<uint64_t>(seq), "allreduce", io, given);
    rec.started(static_cast<uint64_t>(seq), given);
    rec.ended(static_cast<uint64_t>(seq), true);
  }
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(iters);
}

}  // namespace

void run_trace_bench(const TraceBenchOptions& o, const std::function<void(const std::string&)>& print) {
  BRAID_CHECK_ARG(o.bytes >= 4 && o.bytes % 4 == 0, "bench trace: --bytes must be a positive multiple of 4, got {}",
                  o.bytes);
  BRAID_CHECK_ARG(o.iters > 0 && o.rounds > 0 && o.warmup >= 0 && o.micro_iters > 0,
                  "bench trace: --iters, --rounds and --micro-iters must be positive, --warmup not negative");
  const BenchJob job = join_two_process_bench("trace", "two ranks of one group", o.init_method, o.timeout_s);
  std::vector<Variant> variants{{"plain", 0, false, nullptr, {}},
                                {"flight recorder", 2000, false, nullptr, {}},
                                {"desync check", 0, true, nullptr, {}}};
  for (size_t i = 0; i < variants.size(); ++i) {
    collectives::BackendOptions b;
    b.rank = job.rank;
    b.size = job.size;
    b.group_name = fmt::format("bench-trace-{}", i);
    b.store = std::make_shared<store::PrefixStore>(b.group_name + "/", job.store);
    b.timeout = std::chrono::seconds(o.timeout_s);
    b.trace_buffer_size = variants[i].trace_buffer;
    b.desync_check = variants[i].desync;
    variants[i].group = collectives::create_process_group(o.backend, b);
  }
  Tensor t = full({o.bytes / 4}, 1.0);
  for (auto& v : variants) (void)time_allreduces(*v.group, t, o.warmup);
  for (int r = 0; r < o.rounds; ++r) {
    for (auto& v : variants) v.us_per_op.push_back(time_allreduces(*v.group, t, o.iters));
  }
  const double micro_ns = recorder_ns_per_op(o.micro_iters);
  for (auto& v : variants) v.group.reset();
  if (job.rank != 0) return;

  std::string out = fmt::format("# braid bench trace: {} ranks ({}), {}, allreduce of {} B post-and-wait, {} rounds x {} "
                                "ops per variant\n",
                                job.size, job.launcher, o.backend, o.bytes, o.rounds, o.iters);
  out += fmt::format("# {:<16} {:>10} {:>10} {:>14}\n", "variant", "best us/op", "vs plain", "extra us/op");
  double best_plain = 0;
  std::vector<double> extra(variants.size(), 0);
  for (size_t i = 0; i < variants.size(); ++i) {
    const auto& v = variants[i];
    const double best = *std::min_element(v.us_per_op.begin(), v.us_per_op.end());
    if (i == 0) best_plain = best;
    std::vector<double> diffs;
    for (int r = 0; r < o.rounds; ++r) diffs.push_back(v.us_per_op[r] - variants[0].us_per_op[r]);
    extra[i] = median(diffs);
    out += fmt::format("  {:<16} {:>10.3f} {:>10.3f} {:>14}\n", v.name, best, best / best_plain,
                       i == 0 ? std::string("-") : fmt::format("{:+.3f}", extra[i]));
  }
  out += fmt::format("# the recorder alone (scheduled + started + ended, one thread): {:.1f} ns/op over {} ops\n",
                     micro_ns, o.micro_iters);
  const double desync = extra[2];
  out += fmt::format("# desync check: {:+.3f} us/op (median over rounds): {}\n", desync,
                     desync < 1.0 ? "below the 1 us budget: it could be on by default"
                                  : "above the 1 us budget: it stays opt-in (BRAID_DEBUG=DETAIL)");
  out += fmt::format("RESULT trace backend={} bytes={} plain_us={:.3f} recorder_extra_us={:.3f} desync_extra_us={:.3f} "
                     "recorder_alone_ns={:.1f}\n",
                     o.backend, o.bytes, best_plain, extra[1], desync, micro_ns);
  print(out);
}

}  // namespace braid::bench
