// Matrix products on CUDA (cuBLAS, tensor/cuda/blas.cc) against the CPU (OpenBLAS, and the float-
// accumulating loop for 16-bit floats): mm, matmul with batch dims and broadcasting, bmm, dot, mv and
// mm_out, on contiguous operands, transposed views, row slices and layouts no BLAS can read in place;
// the refusals (mixed devices, integer dtypes); and nn::Linear's forward and backward on the GPU.
// Skips, saying so, without a GPU.
#include <catch2/catch.hpp>

#include <string>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "nn/linear.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tensor/ops/linalg.h"
#include "tensor/random.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid {
namespace {

struct Tolerance {
  double rtol, atol;
};

// float32 sums of up to 64 products in another order; 16-bit floats are rounded once from a float sum on
// both sides, so they may differ by one unit in the last place.
Tolerance tolerance(DType d) {
  switch (d) {
    case DType::Float64: return {1e-12, 1e-12};
    case DType::Float32: return {1e-5, 1e-5};
    case DType::Float16: return {2e-3, 2e-3};
    default: return {1.6e-2, 1.6e-2};  // bfloat16
  }
}

Tensor random(Shape shape, DType d, uint64_t seed) {
  Generator gen(seed);
  return randn(std::move(shape), {}, &gen).to(d);
}

void check_close(const Tensor& gpu, const Tensor& cpu, DType d) {
  REQUIRE(gpu.is_cuda());
  CHECK(gpu.dtype() == cpu.dtype());
  CHECK(gpu.shape() == cpu.shape());
  const Tolerance t = tolerance(d);
  CHECK(allclose(gpu.cpu().to(DType::Float64), cpu.to(DType::Float64), t.rtol, t.atol));
}

const DType kFloatTypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};

TEST_CASE("cuda: mm on every float dtype and operand layout matches the CPU", "[gpu][matmul]") {
  if (gpu_test::no_gpu()) return;
  for (DType d : kFloatTypes) {
    INFO(dtype_name(d));
    const Tensor a = random({37, 64}, d, 1);
    const Tensor b = random({64, 23}, d, 2);
    const Tensor at = random({64, 37}, d, 3);  // used transposed
    const Tensor bt = random({23, 64}, d, 4);
    const Tensor wide = random({37, 128}, d, 5);  // every other column: no BLAS layout
    const Tensor ga = a.cuda(0), gb = b.cuda(0), gat = at.cuda(0), gbt = bt.cuda(0), gwide = wide.cuda(0);
    check_close(mm(ga, gb), mm(a, b), d);
    check_close(mm(gat.t(), gb), mm(at.t(), b), d);
    check_close(mm(ga, gbt.t()), mm(a, bt.t()), d);
    check_close(mm(gat.t(), gbt.t()), mm(at.t(), bt.t()), d);
    check_close(mm(ga.narrow(0, 5, 20), gb), mm(a.narrow(0, 5, 20), b), d);  // a row slice
    check_close(mm(gwide.as_strided({37, 64}, {128, 2}, 0), gb), mm(wide.as_strided({37, 64}, {128, 2}, 0), b), d);
    // A transposed output view goes through a temporary.
    Tensor out = Tensor::empty({23, 37}, TensorOptions(d, Device::cuda(0)));
    mm_out(out.t(), ga, gb);
    check_close(out.t(), mm(a, b), d);
    // Empty inner dimension: zeros.
    check_close(mm(ga.narrow(1, 0, 0), gb.narrow(0, 0, 0)), mm(a.narrow(1, 0, 0), b.narrow(0, 0, 0)), d);
  }
}

TEST_CASE("cuda: matmul with batch dims and broadcasting, bmm, dot and mv match the CPU", "[gpu][matmul]") {
  if (gpu_test::no_gpu()) return;
  for (DType d : {DType::Float32, DType::Float64}) {
    INFO(dtype_name(d));
    const Tensor x = random({3, 4, 5, 6}, d, 10);
    const Tensor w = random({6, 7}, d, 11);
    const Tensor y = random({4, 6, 2}, d, 12);
    check_close(matmul(x.cuda(0), w.cuda(0)), matmul(x, w), d);
    check_close(matmul(x.cuda(0), y.cuda(0)), matmul(x, y), d);  // batch [3, 4] broadcast with [4]
    const Tensor p = random({5, 3, 4}, d, 13), q = random({5, 4, 2}, d, 14);
    check_close(bmm(p.cuda(0), q.cuda(0)), bmm(p, q), d);
    const Tensor u = random({9}, d, 15), v = random({9}, d, 16), m = random({4, 9}, d, 17);
    check_close(dot(u.cuda(0), v.cuda(0)), dot(u, v), d);
    check_close(mv(m.cuda(0), v.cuda(0)), mv(m, v), d);
    check_close(matmul(u.cuda(0), m.t().cuda(0)), matmul(u, m.t()), d);
  }
}

TEST_CASE("cuda: matrix products refuse mixed devices and integer dtypes", "[gpu][matmul]") {
  if (gpu_test::no_gpu()) return;
  const Tensor a = random({2, 3}, DType::Float32, 1);
  const Tensor b = random({3, 2}, DType::Float32, 2);
  CHECK_THROWS_WITH(mm(a.cuda(0), b), Catch::Contains("expected all tensors to be on the same device") &&
                                          Catch::Contains("cuda:0") && Catch::Contains("cpu"));
  CHECK_THROWS_WITH(dot(a.view({6}).cuda(0), a.view({6})), Catch::Contains("same device"));
  Tensor cpu_out = Tensor::empty({2, 2}, DType::Float32);
  CHECK_THROWS_WITH(mm_out(cpu_out, a.cuda(0), b.cuda(0)), Catch::Contains("mm_out: out must be a defined tensor on cuda:0"));
  CHECK_THROWS_WITH(mm(a.to(DType::Int64).cuda(0), b.to(DType::Int64).cuda(0)),
                    Catch::Contains("CUDA matrix products support float32, float64, float16 and bfloat16"));
}

TEST_CASE("cuda: nn::Linear trains on the GPU like on the CPU", "[gpu][matmul]") {
  if (gpu_test::no_gpu()) return;
  nn::Linear cpu_layer(16, 8);
  nn::Linear gpu_layer(16, 8);
  {
    autograd::NoGradGuard no_grad;
    Tensor w = gpu_layer.weight(), bias = gpu_layer.bias();
    w.copy_(cpu_layer.weight());
    bias.copy_(cpu_layer.bias());
  }
  gpu_layer.to(Device::cuda(0));
  const Tensor x = random({32, 16}, DType::Float32, 7);
  Tensor xc = x.clone(), xg = x.cuda(0);
  autograd::set_requires_grad(xc);
  autograd::set_requires_grad(xg);
  const Tensor yc = cpu_layer(xc), yg = gpu_layer(xg);
  check_close(yg, yc, DType::Float32);
  autograd::backward(autograd::sum(autograd::mul(yc, yc)));
  autograd::backward(autograd::sum(autograd::mul(yg, yg)));
  check_close(autograd::grad(xg), autograd::grad(xc), DType::Float32);
  check_close(autograd::grad(gpu_layer.weight()), autograd::grad(cpu_layer.weight()), DType::Float32);
  check_close(autograd::grad(gpu_layer.bias()), autograd::grad(cpu_layer.bias()), DType::Float32);
}

}  // namespace
}  // namespace braid
