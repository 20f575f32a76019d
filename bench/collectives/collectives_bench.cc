#include "bench/collectives/collectives_bench.h"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/logging.h"
#include "bench/bench_stats.h"
#include "bench/collectives/collectives_bench_check.h"
#include "bench/collectives/collectives_bench_raw.h"
#include "bench/collectives/collectives_bench_report.h"
#include "collectives/mpi/mpi_bootstrap.h"
#include "collectives/queue/engine_process_group.h"
#include "collectives/registry/engine_factory.h"
#include "runtime/network_env.h"
#include "store/hash_store.h"
#include "store/prefix_store.h"
#include "store/rendezvous.h"
#include "tensor/cuda/device_api.h"

namespace braid::bench {
namespace {

using BenchClock = std::chrono::steady_clock;
constexpr std::array<const char*, 5> kOpNames = {"allreduce", "allgather", "broadcast", "reduce_scatter", "alltoall"};

std::shared_ptr<spdlog::logger> logger() { return logging::get("braid.bench"); }

double seconds_since(BenchClock::time_point t0) {
  return std::chrono::duration<double>(BenchClock::now() - t0).count();
}

// One size in bytes: digits with an optional K, M or G (powers of 1024) and an optional B or iB.
int64_t parse_size(std::string text, const std::string& spec) {
  const std::string original = text;
  for (const char* suffix : {"iB", "B", "b"}) {
    const size_t n = std::strlen(suffix);
    if (text.size() > n && text.compare(text.size() - n, n, suffix) == 0) {
      text.resize(text.size() - n);
      break;
    }
  }
  int64_t scale = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'k': case 'K': scale = int64_t{1} << 10; break;
      case 'm': case 'M': scale = int64_t{1} << 20; break;
      case 'g': case 'G': scale = int64_t{1} << 30; break;
      default: break;
    }
    if (scale != 1) text.pop_back();
  }
  BRAID_CHECK_ARG(!text.empty() && text.find_first_not_of("0123456789") == std::string::npos && text.size() <= 12,
                  "bench collectives: --sizes '{}': '{}' is not a size (e.g. 4096, 4K, 64M, 1G)", spec, original);
  const int64_t value = std::stoll(text) * scale;
  BRAID_CHECK_ARG(value > 0, "bench collectives: --sizes '{}': sizes must be positive", spec);
  return value;
}

// ---- the job: rank, size, store, the braid group and the raw engine ----

struct Job {
  int rank = 0;
  int size = 1;
  std::string launcher = "none";
  std::shared_ptr<store::Store> store;
  Device device = Device::cpu();
  std::shared_ptr<collectives::ProcessGroup> group;  // the one being measured
  // Per --hierarchy value ("auto", "on", "off"): the braid groups, in the order they are measured.
  std::vector<std::pair<std::string, std::shared_ptr<collectives::ProcessGroup>>> groups;
  std::unique_ptr<RawCollective> raw;
};

// How many ops `group` ran through its two-level engine so far (0 for groups without one).
uint64_t hier_ops(const collectives::ProcessGroup& group) {
  const auto* g = dynamic_cast<const collectives::EngineProcessGroup*>(&group);
  if (g == nullptr) return 0;
  uint64_t n = 0;
  for (const char* path : {"allreduce_slices", "allreduce_leaders", "reduce_scatter", "allgather", "broadcast"}) {
    n += g->engine_count("hier", path);
  }
  return n;
}

void connect(Job& job, const CollectivesBenchOptions& o) {
  const std::chrono::milliseconds timeout = std::chrono::seconds(o.timeout_s);
  const store::LaunchInfo launch = store::detect_launch();
  job.launcher = launch.launcher;
  if (!o.init_method.empty() || (launch.launcher != "mpi" && launch.launcher != "none")) {
    const auto rv = store::rendezvous(o.init_method.empty() ? "env://" : o.init_method, -1, -1, timeout);
    job.store = rv.store;
    job.rank = rv.rank;
    job.size = rv.world_size;
    if (!o.init_method.empty()) job.launcher = o.init_method.substr(0, o.init_method.find(':'));
  } else if (launch.launcher == "mpi") {
    job.store = collectives::mpi::mpi_bootstrap_store(timeout);
    job.rank = launch.rank;
    job.size = launch.world_size;
  } else {
    job.store = std::make_shared<store::HashStore>();  // a lone process: a group of one
  }
  logging::set_identity(job.rank, job.size, "bench");

  collectives::BackendOptions options;
  options.rank = job.rank;
  options.size = job.size;
  options.group_name = "bench";
  options.store = std::make_shared<store::PrefixStore>("bench/pg/", job.store);
  options.timeout = timeout;
  options.threads = o.threads;
  // Across hosts gloo must leave loopback: GLOO_SOCKET_IFNAME / BRAID_SOCKET_IFNAME, as for a job.
  options.devices = runtime::network_from_env().gloo_devices;
  if (o.backend == "nccl") {
    const int devices = cuda::device_count();
    BRAID_CHECK_ARG(devices > 0, "bench collectives: --backend nccl needs a CUDA device: {}", cuda::unavailable_reason());
    const int local = launch.local_rank >= 0 ? launch.local_rank : job.rank;
    options.cuda_device = local % devices;
    job.device = Device::cuda(options.cuda_device);
  }
  std::vector<std::string> variants{o.hierarchy};
  if (o.hierarchy == "both") variants = {"on", "off"};
  for (const auto& v : variants) {
    const auto t0 = BenchClock::now();
    auto vo = options;
    if (v != "auto") vo.hierarchy = v == "on";
    if (v == "off" && variants.size() > 1) vo.group_name = "bench-flat";
    if (vo.group_name != options.group_name) {
      vo.store = std::make_shared<store::PrefixStore>("bench/pg-" + vo.group_name + "/", job.store);
    }
    job.groups.emplace_back(v, collectives::create_process_group(o.backend, vo));
    logger()->debug("{} group of {} ranks (two levels: {}) ready in {:.1f} ms", o.backend, job.size, v,
                    1e3 * seconds_since(t0));
  }
  job.group = job.groups.front().second;
  if (!o.raw) return;
  if (o.backend == "mpi") {
    job.raw = make_raw_mpi(o.raw_nonblocking);
  } else if (o.backend == "gloo") {
    job.raw = make_raw_gloo(job.store, job.rank, job.size, timeout,
                            options.devices.empty() ? std::string() : options.devices.front());
  } else {
    job.raw = make_raw_nccl(job.store, job.rank, job.size, job.device.index, timeout);
  }
}

// Every rank's `mine` through the store, in rank order (to every rank when `everyone`, else to rank 0
// only; the others get an empty result).
std::vector<std::vector<double>> exchange(const Job& job, const std::string& key, const std::vector<double>& mine,
                                          bool everyone) {
  store::Bytes bytes(mine.size() * sizeof(double));
  std::memcpy(bytes.data(), mine.data(), bytes.size());
  job.store->set(fmt::format("bench/x/{}/{}", key, job.rank), bytes);
  if (!everyone && job.rank != 0) return {};
  std::vector<std::string> keys;
  for (int r = 0; r < job.size; ++r) keys.push_back(fmt::format("bench/x/{}/{}", key, r));
  std::vector<std::vector<double>> all;
  for (const auto& b : job.store->multi_get(keys)) {
    std::vector<double> v(b.size() / sizeof(double));
    std::memcpy(v.data(), b.data(), v.size() * sizeof(double));
    all.push_back(std::move(v));
  }
  return all;
}

// ---- one op through braid ----

void finish(const std::shared_ptr<collectives::Work>& work, bool poll) {
  if (poll) {
    while (!work->is_completed()) ::sched_yield();
  }
  work->wait();
}

void run_braid(collectives::ProcessGroup& group, BenchOp op, BenchBuffers& b, collectives::TensorList& list,
               bool poll) {
  switch (op) {
    case BenchOp::Allreduce: finish(group.allreduce(list), poll); return;
    case BenchOp::Broadcast: finish(group.broadcast(list), poll); return;
    case BenchOp::Allgather: finish(group.allgather_into_tensor(b.output, b.input), poll); return;
    case BenchOp::ReduceScatter: finish(group.reduce_scatter_tensor(b.output, b.input), poll); return;
    case BenchOp::Alltoall: finish(group.alltoall_single(b.output, b.input, {}, {}), poll); return;
  }
}

// Mean seconds per call of `n` calls of `f` (0 when n is 0).
template <class F>
double time_calls(int n, F&& f) {
  if (n <= 0) return 0;
  const auto t0 = BenchClock::now();
  for (int i = 0; i < n; ++i) f();
  return seconds_since(t0) / n;
}

// CPU seconds this process has used so far, in every thread: the caller's, the engine's (gloo's event
// loop, a lane's thread) and anything else running in it.
double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Median seconds of `n` calls of `f`, each timed alone (0 when n is 0): the warm-up's estimate, which one
// call delayed by a busy machine must not shrink the iteration count for.
template <class F>
double median_call(int n, F&& f) {
  if (n <= 0) return 0;
  std::vector<double> t;
  for (int i = 0; i < n; ++i) {
    const auto t0 = BenchClock::now();
    f();
    t.push_back(seconds_since(t0));
  }
  std::nth_element(t.begin(), t.begin() + n / 2, t.end());
  return t[static_cast<size_t>(n / 2)];
}

// ---- one size ----

struct SizeRun {
  const CollectivesBenchOptions& o;
  Job& job;
  BenchOp op;
  DType dtype;

  CollectivesBenchRow measure(int64_t bytes, size_t index) {
    CollectivesBenchRow row;
    row.requested_bytes = bytes;
    row.count = bench_elements(op, bytes, dtype, job.size);
    row.bytes = row.count * static_cast<int64_t>(element_size(dtype));
    BenchBuffers b = make_bench_buffers(op, row.count, dtype, job.size, job.device);
    collectives::TensorList list{b.input};
    const bool with_raw = job.raw && job.raw->supports(op, dtype);
    if (with_raw) job.raw->prepare(op, b);
    auto braid_call = [&] { run_braid(*job.group, op, b, list, o.poll_wait); };
    auto raw_call = [&] { job.raw->run(op, b); };

    double wrong = -1;
    if (o.check) {
      fill_bench_pattern(op, b, job.rank, job.size);
      braid_call();
      wrong = static_cast<double>(count_wrong(op, b, job.rank, job.size));
    }
    // Warm-up; without --iters its later calls also time one call of each side.
    const int warm = std::max(o.warmup, o.iters > 0 ? 0 : 2);
    if (warm > 0) braid_call();
    const double t_braid = median_call(warm - 1, braid_call);
    if (with_raw && warm > 0) raw_call();
    const double t_raw = with_raw ? median_call(warm - 1, raw_call) : 0.0;

    int iters = o.iters;
    if (iters <= 0) {
      double slowest = 0;
      for (const auto& v : exchange(job, fmt::format("{}/{}/cal", kOpNames[static_cast<int>(op)], index),
                                    {t_braid + t_raw}, true)) {
        slowest = std::max(slowest, v.at(0));
      }
      const double per_round = o.seconds_per_size / o.rounds;
      iters = static_cast<int>(std::clamp(std::floor(per_round / std::max(slowest, 1e-7)),
                                          static_cast<double>(o.min_iters), 1e6));
    }
    row.iters = iters;

    // Rounds: [braid, raw] blocks, the first side alternating; per-rank mean seconds per call.
    std::vector<double> mine{wrong};
    std::vector<double> braid_rounds, raw_rounds;
    double braid_cpu = 0, raw_cpu = 0;  // CPU seconds of this process during each side's calls
    for (int r = 0; r < o.rounds; ++r) {
      auto braid_block = [&] {
        job.group->barrier()->wait();
        const double cpu0 = process_cpu_seconds();
        braid_rounds.push_back(time_calls(iters, braid_call));
        braid_cpu += process_cpu_seconds() - cpu0;
      };
      auto raw_block = [&] {
        if (!with_raw) return;
        job.raw->barrier();
        const double cpu0 = process_cpu_seconds();
        raw_rounds.push_back(time_calls(iters, raw_call));
        raw_cpu += process_cpu_seconds() - cpu0;
      };
      if (r % 2 == 0) {
        braid_block();
        raw_block();
      } else {
        raw_block();
        braid_block();
      }
    }
    mine.insert(mine.end(), braid_rounds.begin(), braid_rounds.end());
    mine.insert(mine.end(), raw_rounds.begin(), raw_rounds.end());
    const double calls = static_cast<double>(iters) * o.rounds;
    mine.push_back(braid_cpu / calls);
    mine.push_back(raw_cpu / calls);

    // Rank 0: a round's time is its slowest rank's; a side's time is its best round. Other ranks only
    // have their own figures.
    const auto all = exchange(job, fmt::format("{}/{}/res", kOpNames[static_cast<int>(op)], index), mine, false);
    const std::vector<std::vector<double>> own{mine};
    const auto& per_rank = all.empty() ? own : all;
    const auto best_round = [&](size_t first, size_t n) {
      double best = INFINITY;
      for (size_t r = 0; r < n; ++r) {
        double slowest = 0;
        for (const auto& v : per_rank) slowest = std::max(slowest, v.at(first + r));
        best = std::min(best, slowest);
      }
      return best;
    };
    const size_t rounds = static_cast<size_t>(o.rounds);
    row.wrong = o.check ? 0 : -1;
    if (o.check) {
      for (const auto& v : per_rank) row.wrong += static_cast<int64_t>(v.at(0));
    }
    const double factor = bus_factor(op, job.size);
    const double t = best_round(1, rounds);
    row.time_us = t * 1e6;
    // CPU per call, summed over ranks: what a call costs the host, which is its time when ranks share cores.
    const size_t cpu_at = 1 + rounds + (with_raw ? rounds : 0);
    for (const auto& v : per_rank) row.cpu_us += v.at(cpu_at) * 1e6;
    row.algbw_gbs = static_cast<double>(row.bytes) / t / 1e9;
    row.busbw_gbs = row.algbw_gbs * factor;
    if (with_raw) {
      const double tr = best_round(1 + rounds, rounds);
      row.raw_time_us = tr * 1e6;
      row.raw_busbw_gbs = static_cast<double>(row.bytes) / tr / 1e9 * factor;
      row.raw_cpu_us = 0.0;
      for (const auto& v : per_rank) *row.raw_cpu_us += v.at(cpu_at + 1) * 1e6;
      std::vector<double> ratios, overheads;
      for (size_t r = 0; r < rounds; ++r) {
        double braid_slowest = 0, raw_slowest = 0;
        for (const auto& v : per_rank) {
          braid_slowest = std::max(braid_slowest, v.at(1 + r));
          raw_slowest = std::max(raw_slowest, v.at(1 + rounds + r));
        }
        ratios.push_back(braid_slowest / raw_slowest);
        overheads.push_back((braid_slowest - raw_slowest) * 1e6);
      }
      row.paired_ratio = median(ratios);
      row.paired_overhead_us = median(overheads);
    }
    return row;
  }
};

}  // namespace

// ---- public ----

std::vector<int64_t> parse_bench_sizes(const std::string& spec, int64_t factor) {
  BRAID_CHECK_ARG(factor >= 2, "bench collectives: the size factor must be at least 2, got {}", factor);
  std::vector<int64_t> sizes;
  const size_t dots = spec.find("..");
  if (dots != std::string::npos) {
    const int64_t lo = parse_size(spec.substr(0, dots), spec);
    const int64_t hi = parse_size(spec.substr(dots + 2), spec);
    BRAID_CHECK_ARG(lo <= hi, "bench collectives: --sizes '{}': the first size is larger than the last", spec);
    for (int64_t s = lo; s <= hi; s *= factor) sizes.push_back(s);
    return sizes;
  }
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = spec.find(',', start);
    sizes.push_back(parse_size(spec.substr(start, comma - start), spec));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return sizes;
}

BenchOp parse_bench_op(const std::string& name) {
  for (size_t i = 0; i < kOpNames.size(); ++i) {
    if (name == kOpNames[i]) return static_cast<BenchOp>(i);
  }
  BRAID_THROW(InvalidArgument, "bench collectives: unknown op '{}' (allreduce, allgather, broadcast, reduce_scatter, "
              "alltoall or all)", name);
}

std::string bench_op_name(BenchOp op) { return kOpNames[static_cast<size_t>(op)]; }

double bus_factor(BenchOp op, int ranks) {
  const double n = ranks;
  switch (op) {
    case BenchOp::Allreduce: return 2 * (n - 1) / n;
    case BenchOp::Broadcast: return 1;
    case BenchOp::Allgather:
    case BenchOp::ReduceScatter:
    case BenchOp::Alltoall: return (n - 1) / n;
  }
  return 1;
}

std::vector<CollectivesBenchTable> run_collectives_bench(const CollectivesBenchOptions& o,
                                                         const std::function<void(const std::string&)>& emit) {
  BRAID_CHECK_ARG(o.backend == "mpi" || o.backend == "gloo" || o.backend == "nccl",
                  "bench collectives: unknown backend '{}' (mpi, gloo or nccl)", o.backend);
  const auto dtype = dtype_from_name(o.dtype);
  BRAID_CHECK_ARG(dtype && (*dtype == DType::Float32 || *dtype == DType::Float64 || *dtype == DType::Int32 ||
                            *dtype == DType::Int64 || *dtype == DType::Float16 || *dtype == DType::BFloat16),
                  "bench collectives: --dtype '{}' is not one of float32, float64, int32, int64, float16, bfloat16",
                  o.dtype);
  BRAID_CHECK_ARG(o.rounds >= 1 && o.warmup >= 0 && o.iters >= 0 && o.min_iters >= 1 && o.seconds_per_size > 0 &&
                      o.timeout_s > 0 && o.threads >= 1,
                  "bench collectives: --rounds, --min-iters, --threads and --timeout must be positive, --iters and "
                  "--warmup not negative (rounds {}, min-iters {}, threads {}, timeout {}, iters {}, warmup {})",
                  o.rounds, o.min_iters, o.threads, o.timeout_s, o.iters, o.warmup);
  BRAID_CHECK_ARG(!o.raw_nonblocking || o.backend == "mpi", "bench collectives: --raw-nonblocking is for --backend mpi");
  BRAID_CHECK_ARG(o.hierarchy == "auto" || o.hierarchy == "on" || o.hierarchy == "off" || o.hierarchy == "both",
                  "bench collectives: --hierarchy must be auto, on, off or both, got '{}'", o.hierarchy);
  std::vector<BenchOp> ops;
  for (const auto& name : o.ops) {
    if (name == "all") {
      for (size_t i = 0; i < kOpNames.size(); ++i) ops.push_back(static_cast<BenchOp>(i));
    } else {
      ops.push_back(parse_bench_op(name));
    }
  }
  BRAID_CHECK_ARG(!ops.empty(), "bench collectives: no --op given");
  const std::vector<int64_t> sizes = parse_bench_sizes(o.sizes, o.factor);

  Job job;
  connect(job, o);
  const auto say = [&](const std::string& text) {
    if (job.rank == 0) emit(text);
  };
  say(preamble(o, job.size, job.launcher, sizes));
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  job.store->set(fmt::format("bench/who/{}", job.rank),
                 fmt::format("#   rank {:>3}: pid {} on {}, device {}", job.rank, ::getpid(), host, job.device.str()));
  if (job.rank == 0) {
    std::string who;
    for (int r = 0; r < job.size; ++r) who += job.store->get_string(fmt::format("bench/who/{}", r)) + "\n";
    say(who);
  }

  std::vector<CollectivesBenchTable> tables;
  size_t tables_run = 0;  // the store keys of every table's exchanges must differ
  for (BenchOp op : ops) {
    for (const auto& [hierarchy, group] : job.groups) {
      job.group = group;
      CollectivesBenchTable table;
      table.op = op;
      table.hierarchy = hierarchy;
      if (job.raw && job.raw->supports(op, *dtype)) table.raw_name = job.raw->call_name(op);
      say(op_header(o, job.size, op, table.raw_name, hierarchy));
      SizeRun run{o, job, op, *dtype};
      const uint64_t hier_before = hier_ops(*group);
      for (size_t i = 0; i < sizes.size(); ++i) {
        table.rows.push_back(run.measure(sizes[i], tables_run * sizes.size() + i));
        say(op_row(op, *dtype, table.rows.back()));
      }
      table.hier_ops = hier_ops(*group) - hier_before;
      say(op_summary(o, job.size, table));
      tables.push_back(std::move(table));
      ++tables_run;
    }
  }
  // Nobody tears down its side of a connection another rank still uses.
  for (const auto& [hierarchy, group] : job.groups) group->barrier()->wait();
  return tables;
}

}  // namespace braid::bench
