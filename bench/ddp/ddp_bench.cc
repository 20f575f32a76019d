// `braid bench ddp`: the job, the two models, the gradient check and the timed steps. The table is in
// ddp_bench_report.cc.
#include "bench/ddp/ddp_bench.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "autograd/engine.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "bench/bench_job.h"
#include "bench/bench_stats.h"
#include "collectives/queue/engine_process_group.h"
#include "collectives/registry/engine_factory.h"
#include "nn/activation.h"
#include "nn/container.h"
#include "nn/linear.h"
#include "nn/optim/sgd.h"
#include "parallel/ddp/ddp.h"
#include "parallel/ddp/default_hooks.h"
#include "store/prefix_store.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"

namespace braid::bench {
namespace {

using Clock = std::chrono::steady_clock;
// Same BLAS and inputs, but the whole batch and its halves are blocked differently by the GEMMs and the
// average is taken in another order: float32 sums of `width` and `batch` terms agree to a few ulps each.
constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-6;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

void check_options(const DdpBenchOptions& o) {
  BRAID_CHECK_ARG(o.backend == "mpi" || o.backend == "gloo", "bench ddp: unknown backend '{}' (mpi or gloo)",
                  o.backend);
  BRAID_CHECK_ARG(o.comm_hook == "builtin" || o.comm_hook == "allreduce" || o.comm_hook == "noop" || o.comm_hook == "fp16",
                  "bench ddp: unknown comm hook '{}' (builtin, allreduce, noop or fp16)", o.comm_hook);
  BRAID_CHECK_ARG(o.iters >= 1 && o.warmup >= 0 && o.layers >= 1 && o.width >= 1 && o.batch >= 1 &&
                      o.bucket_cap_mb > 0 && o.threads >= 1 && o.gloo_threads >= 1 && o.timeout_s >= 1,
                  "bench ddp: --iters, --layers, --width, --batch, --bucket-cap-mb, --threads, --gloo-threads and "
                  "--timeout must be positive and --warmup not negative (iters {}, layers {}, width {}, batch {}, "
                  "bucket cap {} MB, threads {}, gloo threads {}, timeout {}, warmup {})",
                  o.iters, o.layers, o.width, o.batch, o.bucket_cap_mb, o.threads, o.gloo_threads, o.timeout_s,
                  o.warmup);
}

// layers x (Linear(width, width) + ReLU), drawn from Generator(seed): both copies are equal.
std::shared_ptr<nn::Sequential> make_model(const DdpBenchOptions& o) {
  Generator gen(o.seed);
  auto m = std::make_shared<nn::Sequential>();
  for (int64_t l = 0; l < o.layers; ++l) {
    m->push_back(std::make_shared<nn::Linear>(o.width, o.width, /*bias=*/true, &gen));
    m->push_back(std::make_shared<nn::ReLU>());
  }
  return m;
}

struct Phases {
  std::vector<double> total, forward, backward, step;
  void add(Clock::time_point t0, Clock::time_point t1, Clock::time_point t2, Clock::time_point t3) {
    total.push_back(ms_between(t0, t3));
    forward.push_back(ms_between(t0, t1));
    backward.push_back(ms_between(t1, t2));
    step.push_back(ms_between(t2, t3));
  }
  DdpBenchRow row(const std::string& name) const {
    DdpBenchRow r;
    r.name = name;
    r.p50 = median(total);
    r.min = *std::min_element(total.begin(), total.end());
    r.max = *std::max_element(total.begin(), total.end());
    double sum = 0;
    for (double v : total) sum += v;
    r.mean = sum / static_cast<double>(total.size());
    r.forward = median(forward);
    r.backward = median(backward);
    r.step = median(step);
    return r;
  }
};

class Bench {
 public:
  Bench(const DdpBenchOptions& o, const BenchJob& job, std::shared_ptr<collectives::ProcessGroup> group)
      : o_(o), group_(std::move(group)), plain_(make_model(o)), wrapped_(make_model(o)) {
    parallel::DDPOptions d;
    d.process_group = group_;
    d.bucket_cap_mb = o.bucket_cap_mb;
    d.gradient_as_bucket_view = o.gradient_as_bucket_view;
    ddp_ = std::make_shared<parallel::DistributedDataParallel>(wrapped_, d);
    if (o.comm_hook == "allreduce") ddp_->register_comm_hook(parallel::allreduce_hook(group_));
    if (o.comm_hook == "noop") ddp_->register_comm_hook(parallel::noop_hook());
    if (o.comm_hook == "fp16") ddp_->register_comm_hook(parallel::fp16_compress_hook(group_));
    Generator gen(o.seed + 1);
    const int64_t global = o.batch * job.size;
    x_all_ = randn({global, o.width}, DType::Float32, &gen);
    y_all_ = randn({global, o.width}, DType::Float32, &gen);
    x_ = x_all_.slice(0, job.rank * o.batch, (job.rank + 1) * o.batch).clone();
    y_ = y_all_.slice(0, job.rank * o.batch, (job.rank + 1) * o.batch).clone();
    plain_opt_ = std::make_unique<nn::optim::SGD>(plain_->parameters(), nn::optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
    ddp_opt_ = std::make_unique<nn::optim::SGD>(wrapped_->parameters(), nn::optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
  }

  // One DDP backward on this rank's slice against the plain model's on the global batch; the largest
  // |difference| over every rank (allreduce max). Leaves both models' gradients cleared.
  double check_gradients() {
    if (o_.comm_hook == "noop") return skip_check();
    autograd::backward(autograd::mse_loss(plain_->forward(x_all_), y_all_));
    autograd::backward(autograd::mse_loss(ddp_->forward(x_), y_));
    const auto want = plain_->named_parameters();
    const auto got = wrapped_->named_parameters();
    double worst = 0;
    std::string bad;
    for (size_t i = 0; i < want.size(); ++i) {
      const Tensor g = autograd::grad(got[i].second), w = autograd::grad(want[i].second);
      BRAID_CHECK_TYPED(InternalError, g.defined() && w.defined() && g.shape() == w.shape(),
                        "bench ddp: {} has no gradient after the DDP backward, or one shaped unlike the plain model's",
                        got[i].first);
      const double diff = braid::max(braid::abs(braid::sub(g, w))).item<double>();
      worst = std::max(worst, diff);
      if (bad.empty() && !allclose(g, w, kRtol, kAtol)) {
        bad = fmt::format("{} differs by up to {:.3g} (rtol {}, atol {})", got[i].first, diff, kRtol, kAtol);
      }
    }
    Tensor t = full({2}, 0.0, TensorOptions(DType::Float64));
    t.data<double>()[0] = worst;
    t.data<double>()[1] = bad.empty() ? 0.0 : 1.0;
    collectives::TensorList list{t};
    collectives::AllreduceOptions ao;
    ao.reduce_op = collectives::ReduceOp::MAX;
    group_->allreduce(list, ao)->wait();
    BRAID_CHECK_TYPED(InternalError, bad.empty() && t.data<double>()[1] == 0.0,
                      "bench ddp: the DDP gradients differ from a single process's on the whole batch: {}",
                      bad.empty() ? std::string("on another rank") : bad);
    plain_opt_->zero_grad();
    ddp_opt_->zero_grad();
    return t.data<double>()[0];
  }

  // The noop hook does not average: one backward each, to arm the buckets' rebuild as the check would.
  double skip_check() {
    autograd::backward(autograd::mse_loss(ddp_->forward(x_), y_));
    ddp_opt_->zero_grad();
    return -1;
  }

  void run(DdpBenchResult& r) {
    Phases single, ddp;
    std::vector<double> compute, comm, overlap, first_ready, tail;
    std::vector<std::vector<double>> launches;
    uint64_t shared_before = 0;
    for (int s = 0; s < o_.warmup + o_.iters; ++s) {
      const bool timed = s >= o_.warmup;
      if (s == o_.warmup) shared_before = shared_allreduces();
      group_->barrier()->wait();
      step(*plain_, *plain_opt_, timed ? &single : nullptr, nullptr);
      group_->barrier()->wait();
      Clock::time_point backward_start;
      step(*ddp_, *ddp_opt_, timed ? &ddp : nullptr, &backward_start);
      if (!timed) continue;
      const parallel::ReducerStats st = ddp_->logging_data();
      compute.push_back(st.backward_compute_ms);
      comm.push_back(st.comm_ms);
      overlap.push_back(st.overlap_fraction);
      const double ready = ms_between(backward_start, st.first_ready);
      first_ready.push_back(ready);
      tail.push_back(ms_between(st.last_ready, backward_start) + ddp.backward.back());
      if (launches.size() < st.bucket_launch_ms.size()) launches.resize(st.bucket_launch_ms.size());
      for (size_t b = 0; b < st.bucket_launch_ms.size(); ++b) launches[b].push_back(ready + st.bucket_launch_ms[b]);
      r.overlap.bucket_bytes = st.bucket_bytes;
      r.overlap.bucket_reductions += st.bucket_launch_ms.size();
    }
    r.overlap.shared_reductions = shared_allreduces() - shared_before;
    r.single = single.row("single");
    r.ddp = ddp.row("ddp");
    r.overlap.backward_compute_ms = median(compute);
    r.overlap.comm_ms = median(comm);
    r.overlap.overlap_fraction = median(overlap);
    r.overlap.first_ready_ms = median(first_ready);
    r.overlap.tail_ms = median(tail);
    for (const auto& l : launches) r.overlap.launch_ms.push_back(median(l));
  }

 private:
  uint64_t shared_allreduces() const {
    const auto* g = dynamic_cast<const collectives::EngineProcessGroup*>(group_.get());
    return g != nullptr ? g->engine_count("shm", "pool_allreduce") : 0;
  }

  void step(nn::Module& model, nn::optim::SGD& opt, Phases* phases, Clock::time_point* backward_start) {
    const auto t0 = Clock::now();
    opt.zero_grad();
    const Tensor loss = autograd::mse_loss(model.forward(x_), y_);
    const auto t1 = Clock::now();
    if (backward_start) *backward_start = t1;
    autograd::backward(loss);
    const auto t2 = Clock::now();
    opt.step();
    const auto t3 = Clock::now();
    if (phases) phases->add(t0, t1, t2, t3);
  }

  const DdpBenchOptions& o_;
  std::shared_ptr<collectives::ProcessGroup> group_;
  std::shared_ptr<nn::Sequential> plain_, wrapped_;
  std::shared_ptr<parallel::DistributedDataParallel> ddp_;
  Tensor x_all_, y_all_, x_, y_;
  std::unique_ptr<nn::optim::SGD> plain_opt_, ddp_opt_;
};

}  // namespace

DdpBenchResult run_ddp_bench(const DdpBenchOptions& o, const std::function<void(const std::string&)>& print) {
  check_options(o);
  const BenchJob job = join_two_process_bench("ddp", "two DDP ranks", o.init_method, o.timeout_s);
  openblas_set_num_threads(o.threads);
  publish_bench_worker(job, "bench/ddp/worker");

  collectives::BackendOptions options;
  options.rank = job.rank;
  options.size = job.size;
  options.group_name = "bench-ddp";
  options.store = std::make_shared<store::PrefixStore>("bench/ddp/pg/", job.store);
  options.timeout = std::chrono::seconds(o.timeout_s);
  options.threads = o.gloo_threads;
  auto group = collectives::create_process_group(o.backend, options);

  DdpBenchResult r;
  r.rank = job.rank;
  r.size = job.size;
  {
    Bench bench(o, job, group);
    r.max_abs_diff = bench.check_gradients();
    bench.run(r);
  }
  r.workers = read_bench_workers(job, "bench/ddp/worker");
  group->barrier()->wait();  // nobody tears down its side of a connection another rank still uses
  if (job.rank == 0 && print) print(format_ddp_bench(o, r));
  return r;
}

}  // namespace braid::bench
