// braid's float32 GEMM against a direct cblas_sgemm on the same sizes. braid's mm is a thin front end
// over the same OpenBLAS call, so the gap measures its overhead: argument checks, the stride analysis and,
// for plain mm, taking the output from the caching allocator. The rates use wall time, since OpenBLAS runs
// its own threads; both sides share one process and thus one OpenBLAS thread pool. BM_paired gives the
// load-robust ratio (see below); bench/run_tensor_bench.sh prints both kinds as a table.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tensor/factory.h"
#include "tensor/ops/linalg.h"

namespace {

using braid::Tensor;

void set_flops(benchmark::State& state, int64_t n) {
  // GFLOP/s directly: 2n^3 floating-point operations per multiply.
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(n * n * n) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

struct Operands {
  Tensor a, b, out;
  explicit Operands(int64_t n) {
    braid::Generator g(42);
    a = braid::randn({n, n}, braid::DType::Float32, &g);
    b = braid::randn({n, n}, braid::DType::Float32, &g);
    out = braid::zeros({n, n}, braid::DType::Float32);
  }
};

// The same values as braid's operands, in plain 64-byte aligned buffers, for the direct cblas_sgemm calls.
struct RawOperands {
  float* a;
  float* b;
  float* c;
  explicit RawOperands(const Operands& op) {
    const size_t count = static_cast<size_t>(op.a.numel());
    const size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
    a = static_cast<float*>(std::aligned_alloc(64, bytes));
    b = static_cast<float*>(std::aligned_alloc(64, bytes));
    c = static_cast<float*>(std::aligned_alloc(64, bytes));
    std::memcpy(a, op.a.data_ptr(), count * sizeof(float));
    std::memcpy(b, op.b.data_ptr(), count * sizeof(float));
    std::memset(c, 0, count * sizeof(float));
  }
  ~RawOperands() {
    std::free(a);
    std::free(b);
    std::free(c);
  }
  RawOperands(const RawOperands&) = delete;
  RawOperands& operator=(const RawOperands&) = delete;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

void BM_braid_mm_out(benchmark::State& state) {
  const int64_t n = state.range(0);
  Operands op(n);
  for (auto _ : state) {
    braid::mm_out(op.out, op.a, op.b);
    benchmark::DoNotOptimize(op.out.data_ptr());
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
}

void BM_braid_mm(benchmark::State& state) {
  const int64_t n = state.range(0);
  Operands op(n);
  for (auto _ : state) {
    Tensor c = braid::mm(op.a, op.b);
    benchmark::DoNotOptimize(c.data_ptr());
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
}

void BM_cblas_sgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Operands op(n);
  RawOperands raw(op);
  const auto ni = static_cast<blasint>(n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, raw.a, ni, raw.b, ni, 0.0f, raw.c, ni);
    benchmark::DoNotOptimize(raw.c);
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
}

// Paired runs: each iteration times one braid call and one cblas_sgemm call back to back (alternating
// which goes first), so both sides see the same machine load; the per-pair speed ratios are then robust
// on a shared machine where separate runs minutes apart are not comparable. Reports the median ratio
// (braid speed / cblas speed) and each side's median rate.
void BM_paired(benchmark::State& state, bool allocate) {
  const int64_t n = state.range(0);
  Operands op(n);
  RawOperands raw(op);
  const auto ni = static_cast<blasint>(n);
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const auto run_braid = [&] {
    const auto t0 = Clock::now();
    if (allocate) {
      const Tensor c = braid::mm(op.a, op.b);
      benchmark::DoNotOptimize(c.data_ptr());
    } else {
      braid::mm_out(op.out, op.a, op.b);
      benchmark::DoNotOptimize(op.out.data_ptr());
    }
    benchmark::ClobberMemory();
    return seconds(Clock::now() - t0);
  };
  const auto run_ref = [&] {
    const auto t0 = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, raw.a, ni, raw.b, ni, 0.0f, raw.c, ni);
    benchmark::DoNotOptimize(raw.c);
    benchmark::ClobberMemory();
    return seconds(Clock::now() - t0);
  };
  std::vector<double> t_braid, t_ref, ratio;
  bool braid_first = true;
  for (auto _ : state) {
    double tb = 0, tr = 0;
    if (braid_first) {
      tb = run_braid();
      tr = run_ref();
    } else {
      tr = run_ref();
      tb = run_braid();
    }
    braid_first = !braid_first;
    state.SetIterationTime(tb + tr);
    t_braid.push_back(tb);
    t_ref.push_back(tr);
    ratio.push_back(tr / tb);
  }
  const double gflop = 2.0 * static_cast<double>(n * n * n) * 1e-9;
  state.counters["braid/ref"] = median(ratio);
  state.counters["braid_GFLOP/s"] = gflop / median(t_braid);
  state.counters["ref_GFLOP/s"] = gflop / median(t_ref);
}

void paired_sizes(benchmark::internal::Benchmark* b) {
  b->Arg(512)->Arg(1024)->Arg(2048)->UseManualTime()->MinTime(2.0)->Unit(benchmark::kMillisecond);
}
BENCHMARK_CAPTURE(BM_paired, mm_out, false)->Apply(paired_sizes);
BENCHMARK_CAPTURE(BM_paired, mm, true)->Apply(paired_sizes);

// "min" (the fastest repetition) next to the median: on a shared machine it is the least disturbed run.
double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

void gemm_sizes(benchmark::internal::Benchmark* b) {
  b->Arg(512)->Arg(1024)->Arg(2048)->UseRealTime()->Unit(benchmark::kMillisecond)->ComputeStatistics("min", min_of);
}
BENCHMARK(BM_cblas_sgemm)->Apply(gemm_sizes);
BENCHMARK(BM_braid_mm_out)->Apply(gemm_sizes);
BENCHMARK(BM_braid_mm)->Apply(gemm_sizes);

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("openblas_threads", std::to_string(openblas_get_num_threads()));
  benchmark::AddCustomContext("openblas_config", openblas_get_config());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
