// `braid bench dist-autograd`: the remote model, the gradient check, the timed iterations and the launch
// of the two workers. The statistics and the table are in dist_autograd_bench_report.cc.
#include "bench/dist_autograd/dist_autograd_bench.h"

#include <cblas.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>

#include "autograd/engine.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "base/logging.h"
#include "bench/bench_job.h"
#include "bench/dist_autograd/dist_autograd_bench_model.h"
#include "dist_autograd/context.h"
#include "dist_autograd/rpc_hooks.h"
#include "nn/linear.h"
#include "rpc/api.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"

namespace braid::bench {
namespace {

using BenchClock = std::chrono::steady_clock;
// Same BLAS, same inputs, but the two sides may block the products differently (the forward runs on an
// RPC pool thread): float32 sums of 1024 terms agree to a few ulps times sqrt(1024).
constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;

std::shared_ptr<spdlog::logger> logger() { return logging::get("braid.bench"); }

double ms_between(BenchClock::time_point a, BenchClock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The model both sides build: nn::Linear(in, out, bias) drawn from Generator(seed).
std::shared_ptr<nn::Linear> make_linear(int64_t in, int64_t out, uint64_t seed) {
  Generator gen(seed);
  return std::make_shared<nn::Linear>(in, out, /*bias=*/true, &gen);
}

void check_options(const DistAutogradBenchOptions& o) {
  BRAID_CHECK_ARG(!o.model_class.empty(), "bench dist-autograd: no model class given");
  BRAID_CHECK_ARG(o.transport == "auto" || o.transport == "tcp" || o.transport == "ucx",
                  "bench dist-autograd: unknown transport '{}' (auto, tcp or ucx)", o.transport);
  BRAID_CHECK_ARG(o.iters >= 1 && o.warmup >= 0 && o.batch >= 1 && o.features >= 1 && o.threads >= 1 &&
                      o.rpc_threads >= 1 && o.timeout_s >= 1 && o.timeline >= 0,
                  "bench dist-autograd: --iters, --batch, --features, --threads, --rpc-threads and --timeout must be "
                  "positive and --warmup and --timeline not negative (iters {}, batch {}, features {}, threads {}, "
                  "rpc-threads {}, timeout {}, warmup {}, timeline {})",
                  o.iters, o.batch, o.features, o.threads, o.rpc_threads, o.timeout_s, o.warmup, o.timeline);
}

// Largest |a - b|, and whether a and b are allclose; a shape mismatch fails with an infinite difference.
struct Compared {
  bool close = false;
  double max_abs_diff = 0;
};
Compared compare(const Tensor& got, const Tensor& want) {
  if (!got.defined() || got.shape() != want.shape() || got.dtype() != want.dtype()) {
    return {false, std::numeric_limits<double>::infinity()};
  }
  const double diff = braid::max(braid::abs(braid::sub(got, want))).item<double>();
  return {allclose(got, want, kRtol, kAtol), diff};
}

class Caller {
 public:
  Caller(const rpc::WorkerInfo& owner, const DistAutogradBenchOptions& o)
      : o_(o),
        owner_(owner),
        remote_(rpc::remote(owner, o.model_class, {rpc::Value(o.features), rpc::Value(o.features),
                                                    rpc::Value(static_cast<int64_t>(o.seed))})),
        local_(make_linear(o.features, o.features, o.seed)) {
    Generator gen(o.seed + 1);
    x_ = randn({o.batch, o.features}, DType::Float32, &gen);
    autograd::set_requires_grad(x_);
  }

  // One distributed iteration's gradients (x on this worker, W and b in the owner's context) against the
  // local ones.
  DistAutogradGradCheck check_gradients() {
    const autograd::TensorList want = local_grads();
    autograd::TensorList got(3);
    {
      dist_autograd::Context ctx;
      const Tensor out = remote_.rpc_sync().call("forward", {rpc::Value(x_)}).as_tensor();
      BRAID_CHECK_TYPED(InternalError, autograd::requires_grad(out),
                        "bench dist-autograd: the remote forward's result does not require grad: distributed "
                        "autograd did not record the call on '{}'", remote_.owner_name());
      dist_autograd::backward(ctx.id(), {autograd::sum(out)});
      const dist_autograd::GradientMap mine = dist_autograd::get_gradients(ctx.id());
      // x's gradient only; W's and b's too when this worker owns the model (a job of one worker).
      const size_t expected = owner_.id == rpc::current_agent().self().id ? 3 : 1;
      BRAID_CHECK_TYPED(InternalError, mine.size() == expected && mine.contains(x_),
                        "bench dist-autograd: this worker's context holds {} gradients{}; expected {}, x's among "
                        "them", mine.size(), mine.contains(x_) ? "" : ", none of x", expected);
      got[0] = mine.at(x_);
      const rpc::ValueList theirs = remote_.rpc_sync().call("gradients", {rpc::Value(ctx.id())}).as_list();
      got[1] = theirs.at(0).as_tensor();
      got[2] = theirs.at(1).as_tensor();
    }
    DistAutogradGradCheck check;
    check.ok = true;
    const char* names[] = {"x", "weight", "bias"};
    for (size_t i = 0; i < 3; ++i) {
      const Compared c = compare(got[i], want[i]);
      check.max_abs_diff = std::max(check.max_abs_diff, c.max_abs_diff);
      if (!c.close && check.ok) {
        check.ok = false;
        check.detail = fmt::format("the gradient of {} {} differs from the local one by up to {:.3g} "
                                   "(rtol {}, atol {})", names[i], shape_str(want[i].shape()), c.max_abs_diff,
                                   kRtol, kAtol);
      }
    }
    return check;
  }

  // `warmup` untimed then `iters` timed iterations of each row, alternating local and distributed.
  void time_rows(std::vector<double>& local_ms, std::vector<double>& dist_ms, DistAutogradBenchRow& local_phases,
                 DistAutogradBenchRow& dist_phases) {
    for (int i = 0; i < o_.warmup; ++i) {
      local_iteration(nullptr);
      distributed_iteration(nullptr);
    }
    local_ms.reserve(static_cast<size_t>(o_.iters));
    dist_ms.reserve(static_cast<size_t>(o_.iters));
    for (int i = 0; i < o_.iters; ++i) {
      local_ms.push_back(local_iteration(&local_phases));
      dist_ms.push_back(distributed_iteration(&dist_phases));
    }
  }

  // `o.timeline` distributed iterations through "forward_traced", each followed (untimed) by a "trace" call
  // for the owner's timestamps. Empty, with the reason in `note`, when the owner runs on another host.
  std::optional<DistAutogradTimeline> timeline(std::string& note) {
    // A leaf of its own, so that its hook does not run in the timed iterations.
    Tensor xt = x_.clone();
    autograd::set_requires_grad(xt);
    auto accumulated = std::make_shared<std::atomic<int64_t>>(0);
    autograd::register_post_accumulate_grad_hook(xt, [accumulated](const Tensor&, const Tensor&) {
      accumulated->store(detail::bench_clock_ns(), std::memory_order_relaxed);
    });
    std::vector<std::array<int64_t, kCallerStamps>> mine;
    std::vector<rpc::ValueList> theirs;
    for (int i = 0; i < o_.timeline; ++i) {
      std::array<int64_t, kCallerStamps> t{};
      {
        t[0] = detail::bench_clock_ns();
        std::optional<dist_autograd::Context> ctx(std::in_place);
        const int64_t id = ctx->id();
        {
          const Tensor out = remote_.rpc_sync().call("forward_traced", {rpc::Value(xt)}).as_tensor();
          t[1] = detail::bench_clock_ns();
          const Tensor loss = autograd::sum(out);
          t[2] = detail::bench_clock_ns();
          dist_autograd::backward(id, {loss});
          t[4] = detail::bench_clock_ns();
          t[3] = accumulated->load(std::memory_order_relaxed);
          const dist_autograd::GradientMap grads = dist_autograd::get_gradients(id);
          t[5] = detail::bench_clock_ns();
        }
        ctx.reset();
        t[6] = detail::bench_clock_ns();
      }
      mine.push_back(t);
      theirs.push_back(remote_.rpc_sync().call("trace", {}).as_list());
    }
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    if (theirs.empty()) return std::nullopt;
    if (theirs[0].at(0).as_string() != host) {
      note = fmt::format("no timeline: the owner runs on {}, this worker on {} (their clocks are not one)",
                         theirs[0].at(0).as_string(), host);
      return std::nullopt;
    }
    return summarize_timeline(mine, theirs);
  }

 private:
  static constexpr size_t kCallerStamps = 7;

  // The segments between the caller's stamps (t) and the owner's (b: 1 + OwnerStamp in "trace").
  static DistAutogradTimeline summarize_timeline(const std::vector<std::array<int64_t, kCallerStamps>>& mine,
                                                 const std::vector<rpc::ValueList>& theirs) {
    using detail::OwnerStamp;
    struct Def {
      const char* key;
      const char* what;
      const char* where;
    };
    static constexpr Def kDefs[] = {
        {"x_to_owner", "x to the owner", "wire"},
        {"owner_forward", "forward (linear)", "worker1"},
        {"out_back", "out back", "wire"},
        {"sum", "sum", "worker0"},
        {"dout_to_owner", "d out to the owner", "wire"},
        {"owner_backward", "backward until d x is sent", "worker1"},
        {"dx_back", "d x back, accumulated", "wire"},
        {"backward_done", "backward returns", "replies"},
        {"gradients", "get_gradients", "worker0"},
        {"release", "release", "both"},
        // Beside the path: the owner's backward in detail.
        {"owner_linear_backward", "d out -> d W or d b ready", "worker1"},
        {"owner_accumulate", "-> d W, d b accumulated", "worker1"},
        {"owner_params_to_dx", "-> d x about to be sent", "worker1"},
    };
    constexpr size_t kSegments = std::size(kDefs);
    constexpr size_t kOnPath = 10;
    std::vector<std::vector<double>> samples(kSegments);
    for (size_t i = 0; i < mine.size(); ++i) {
      const auto& t = mine[i];
      const auto b = [&](OwnerStamp s) { return theirs[i].at(1 + s).as_int(); };
      BRAID_CHECK_TYPED(InternalError, t[3] > 0 && b(detail::kOutGrad) > 0 && b(detail::kInputGrad) > 0 &&
                                           b(detail::kParamsReady) > 0 && b(detail::kParamsDone) > 0,
                        "bench dist-autograd: traced iteration {} misses a timestamp (x's accumulation {}, the "
                        "owner's d out {}, d x {}, d W and d b {}): a hook did not run",
                        i, t[3], b(detail::kOutGrad), b(detail::kInputGrad), b(detail::kParamsDone));
      // The path, stamp by stamp; then the owner's parameters, beside it.
      const int64_t path[] = {t[0], b(detail::kForwardEntry), b(detail::kForwardExit), t[1], t[2], b(detail::kOutGrad),
                              b(detail::kInputGrad), t[3], t[4], t[5], t[6]};
      for (size_t k = 0; k + 1 < std::size(path); ++k) {
        samples[k].push_back(static_cast<double>(path[k + 1] - path[k]) / 1e6);
      }
      const int64_t aside[] = {b(detail::kOutGrad), b(detail::kParamsReady), b(detail::kParamsDone),
                               b(detail::kInputGrad)};
      for (size_t k = 0; k + 1 < std::size(aside); ++k) {
        samples[kOnPath + k].push_back(static_cast<double>(aside[k + 1] - aside[k]) / 1e6);
      }
    }
    DistAutogradTimeline tl;
    tl.iters = static_cast<int64_t>(mine.size());
    for (size_t k = 0; k < kSegments; ++k) {
      const DistAutogradBenchRow sum = summarize_iterations(kDefs[k].key, samples[k]);
      DistAutogradSegment seg{kDefs[k].key, kDefs[k].what, kDefs[k].where, sum.mean_ms, sum.p50_ms};
      (k < kOnPath ? tl.segments : tl.aside).push_back(std::move(seg));
    }
    return tl;
  }

  autograd::TensorList local_grads() {
    const Tensor out = autograd::linear(x_, local_->weight(), local_->bias());
    return autograd::grad({autograd::sum(out)}, {x_, local_->weight(), local_->bias()});
  }

  // Returns the iteration's milliseconds; adds each phase's to `phases` when given.
  double local_iteration(DistAutogradBenchRow* phases) {
    const auto t0 = BenchClock::now();
    BenchClock::time_point t1;
    {
      const Tensor loss = autograd::sum(autograd::linear(x_, local_->weight(), local_->bias()));
      t1 = BenchClock::now();
      const autograd::TensorList grads = autograd::grad({loss}, {x_, local_->weight(), local_->bias()});
    }
    const auto t2 = BenchClock::now();
    if (phases != nullptr) {
      phases->forward_ms += ms_between(t0, t1);
      phases->backward_ms += ms_between(t1, t2);
    }
    return ms_between(t0, t2);
  }

  double distributed_iteration(DistAutogradBenchRow* phases) {
    const auto t0 = BenchClock::now();
    BenchClock::time_point t1, t2, t3;
    {
      std::optional<dist_autograd::Context> ctx(std::in_place);
      const int64_t id = ctx->id();
      {
        const Tensor out = remote_.rpc_sync().call("forward", {rpc::Value(x_)}).as_tensor();
        const Tensor loss = autograd::sum(out);
        t1 = BenchClock::now();
        dist_autograd::backward(id, {loss});
        t2 = BenchClock::now();
        const dist_autograd::GradientMap grads = dist_autograd::get_gradients(id);
        t3 = BenchClock::now();
      }
      ctx.reset();  // releases the context here and on the owner, as leaving its scope does
    }
    const auto t4 = BenchClock::now();
    if (phases != nullptr) {
      phases->forward_ms += ms_between(t0, t1);
      phases->backward_ms += ms_between(t1, t2);
      phases->gradients_ms += ms_between(t2, t3);
      phases->release_ms += ms_between(t3, t4);
    }
    return ms_between(t0, t4);
  }

  const DistAutogradBenchOptions& o_;
  rpc::WorkerInfo owner_;
  rpc::RRef remote_;
  std::shared_ptr<nn::Linear> local_;
  Tensor x_;
};

// A row from its samples, with the phase sums turned into means.
DistAutogradBenchRow finish_row(std::string mode, std::vector<double> samples, const DistAutogradBenchRow& phases) {
  const auto n = static_cast<double>(samples.size());
  DistAutogradBenchRow row = summarize_iterations(std::move(mode), std::move(samples));
  row.forward_ms = phases.forward_ms / n;
  row.backward_ms = phases.backward_ms / n;
  row.gradients_ms = phases.gradients_ms / n;
  row.release_ms = phases.release_ms / n;
  return row;
}

}  // namespace

DistAutogradBenchReport run_dist_autograd_bench_caller(
    const rpc::WorkerInfo& owner, const DistAutogradBenchOptions& o,
    const std::function<void(const DistAutogradBenchReport&, const DistAutogradBenchRow&)>& on_row) {
  check_options(o);
  openblas_set_num_threads(o.threads);
  dist_autograd::ensure_installed();
  DistAutogradBenchReport report;
  report.transport = rpc::current_agent().transport_name();
  report.batch = o.batch;
  report.features = o.features;
  report.threads = o.threads;
  report.rpc_threads = o.rpc_threads;

  Caller caller(owner, o);
  report.check = caller.check_gradients();
  BRAID_CHECK_TYPED(InternalError, report.check.ok,
                    "bench dist-autograd: the distributed gradients (model on '{}') differ from the local ones: {}",
                    owner.name, report.check.detail);

  std::vector<double> local_ms, dist_ms;
  DistAutogradBenchRow local_phases, dist_phases;
  caller.time_rows(local_ms, dist_ms, local_phases, dist_phases);
  report.rows.push_back(finish_row("local", std::move(local_ms), local_phases));
  if (on_row) on_row(report, report.rows.back());
  report.rows.push_back(finish_row("distributed", std::move(dist_ms), dist_phases));
  if (on_row) on_row(report, report.rows.back());
  if (o.timeline > 0) report.timeline = caller.timeline(report.timeline_note);
  return report;
}

DistAutogradBenchReport run_dist_autograd_bench(const DistAutogradBenchOptions& o,
                                                const std::function<void(const std::string&)>& emit) {
  check_options(o);
  const BenchJob job = join_two_process_bench("dist-autograd", "worker0 drives, worker1 owns the model",
                                              o.init_method, o.timeout_s);
  publish_bench_worker(job, "bench/dist_autograd/who");
  openblas_set_num_threads(o.threads);  // worker1's forward and backward run in its RPC pool threads
  dist_autograd::ensure_installed();
  register_dist_autograd_bench_classes(rpc::global_registry());
  rpc::RpcBackendOptions options;
  options.transport = o.transport;
  options.num_worker_threads = o.rpc_threads;
  options.rpc_timeout = std::chrono::milliseconds(int64_t{o.timeout_s} * 1000);
  options.join_timeout = options.rpc_timeout;
  options.store = job.store;
  rpc::init_rpc(fmt::format("worker{}", job.rank), job.rank, job.size, options);

  DistAutogradBenchReport report;
  if (job.rank != 0) {
    rpc::shutdown(true);  // serves until worker0 shuts down as well
    return report;
  }
  try {
    std::string preamble = fmt::format("# braid bench dist-autograd: transport {}, 2 workers (launcher {}): worker0 "
                                       "drives, worker1 owns the model\n",
                                       rpc::current_agent().transport_name(), job.launcher);
    preamble += read_bench_workers(job, "bench/dist_autograd/who");
    emit(preamble);
    report = run_dist_autograd_bench_caller(rpc::get_worker_info("worker1"), o,
                                            [&](const DistAutogradBenchReport& r, const DistAutogradBenchRow& row) {
                                              if (row.mode == "local") {
                                                emit(fmt::format("# gradient check: distributed == local (allclose), "
                                                                 "max |diff| {:.3g}\n",
                                                                 r.check.max_abs_diff) +
                                                     format_dist_autograd_bench_header(o));
                                              }
                                              emit(format_dist_autograd_bench_row(row));
                                            });
  } catch (...) {
    // worker1 waits in its graceful shutdown: join it there so that it ends now, then report the failure.
    try {
      rpc::shutdown(true);
    } catch (const std::exception& e) {
      logger()->warn("bench dist-autograd: shutdown after a failed run failed too: {}", e.what());
    }
    throw;
  }
  rpc::shutdown(true);
  emit(format_dist_autograd_bench_footer(report) + format_dist_autograd_timeline(report) +
       format_dist_autograd_bench_results(report));
  return report;
}

}  // namespace braid::bench
