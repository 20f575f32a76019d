// braid's float32 GEMM against a direct cblas_sgemm on the same sizes. braid's mm is a thin front end
// over the same OpenBLAS call, so the gap measures its overhead: argument checks, the stride analysis and,
// for plain mm, taking the output from the caching allocator. The rates use wall time (UseRealTime), since
// OpenBLAS runs its own threads; both sides share one process and thus one OpenBLAS thread pool.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cstdlib>
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
  // The same values as braid's operands, in plain 64-byte aligned buffers.
  const Operands op(n);
  const size_t count = static_cast<size_t>(n * n);
  const size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
  auto* a = static_cast<float*>(std::aligned_alloc(64, bytes));
  auto* b = static_cast<float*>(std::aligned_alloc(64, bytes));
  auto* c = static_cast<float*>(std::aligned_alloc(64, bytes));
  const float* pa = op.a.data<float>();
  const float* pb = op.b.data<float>();
  for (size_t i = 0; i < count; ++i) {
    a[i] = pa[i];
    b[i] = pb[i];
    c[i] = 0.0f;
  }
  const auto ni = static_cast<blasint>(n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, a, ni, b, ni, 0.0f, c, ni);
    benchmark::DoNotOptimize(c);
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
  std::free(a);
  std::free(b);
  std::free(c);
}

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
