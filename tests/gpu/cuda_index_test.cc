// CUDA indexing against the CPU: index_select, gather and scatter_add on every dtype, strided operands and
// both index dtypes; embedding; embedding_bag's sum, mean and max with their dense and sparse gradients and
// per-sample weights; gelu (through the erf kernel). Index values are checked on the host before a kernel
// runs: an out-of-range index on CUDA gets the CPU's message and leaves the target untouched.
//
// Without a usable GPU every test case returns early with a warning saying so.
#include <catch2/catch.hpp>

#include <vector>

#include "autograd/engine.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/variable.h"
#include "tensor/factory.h"
#include "tensor/ops/shape_ops.h"
#include "tensor/sparse.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid {
namespace {

using gpu_test::check_matches;
using gpu_test::dname;
using gpu_test::no_gpu;
using gpu_test::sample;
using Catch::Matchers::Contains;

const Device kGpu = Device::cuda(0);

Tensor indices(const std::vector<int64_t>& v, const Shape& shape, DType dtype = DType::Int64) {
  return from_vector(v, shape).to(dtype);
}

}  // namespace

TEST_CASE("cuda: index_select matches the CPU for every dtype, dim and index dtype", "[gpu][index]") {
  if (no_gpu()) return;
  for (DType dt : kRealDTypes) {
    const Tensor a = sample(dt, {4, 5, 3}, 21);
    for (DType idt : {DType::Int64, DType::Int32}) {
      const Tensor idx = indices({2, 0, 2, 1}, {4}, idt);
      for (int64_t dim = 0; dim < 3; ++dim) {
        INFO(dname(dt) << " dim " << dim << " index " << dname(idt));
        check_matches(index_select(a.cuda(), dim, idx.cuda()), index_select(a, dim, idx));
      }
      // A transposed (non-contiguous) source and a 0-d index.
      check_matches(index_select(a.transpose(0, 2).cuda(), 1, idx.cuda()), index_select(a.transpose(0, 2), 1, idx));
      const Tensor one = indices({3}, {}, idt);
      check_matches(index_select(a.cuda(), 1, one.cuda()), index_select(a, 1, one));
    }
  }
}

TEST_CASE("cuda: gather matches the CPU for every dtype and layout", "[gpu][index]") {
  if (no_gpu()) return;
  const Tensor idx = indices({0, 2, 1, 1, 0, 2, 2, 2}, {2, 4});
  for (DType dt : kRealDTypes) {
    INFO(dname(dt));
    const Tensor a = sample(dt, {3, 4}, 22);
    check_matches(gather(a.cuda(), 0, idx.cuda()), gather(a, 0, idx));
    const Tensor idx1 = indices({3, 0, 1, 3, 2, 2}, {3, 2}, DType::Int32);
    check_matches(gather(a.cuda(), 1, idx1.cuda()), gather(a, 1, idx1));
    const Tensor strided = idx1.t().contiguous().t();  // the index's values, column-major
    check_matches(gather(a.t().cuda(), 0, strided.cuda()), gather(a.t(), 0, strided));
  }
}

TEST_CASE("cuda: scatter_add sums duplicates like the CPU for every dtype", "[gpu][index]") {
  if (no_gpu()) return;
  // Index 1 three times in the first column: the atomics must add every one.
  const Tensor idx = indices({1, 0, 1, 2, 1, 0}, {3, 2});
  for (DType dt : kRealDTypes) {
    INFO(dname(dt));
    const Tensor self = sample(dt, {3, 2}, 23, /*nonneg=*/true);
    const Tensor src = sample(dt, {3, 2}, 24, /*nonneg=*/true);
    check_matches(scatter_add(self.cuda(), 0, idx.cuda(), src.cuda()), scatter_add(self, 0, idx, src));
    const Tensor idx1 = indices({1, 1, 0, 0, 1, 0}, {3, 2}, DType::Int32);
    check_matches(scatter_add(self.cuda(), 1, idx1.cuda(), src.cuda()), scatter_add(self, 1, idx1, src));
  }
  // Many collisions on one float cell: every addend arrives.
  const Tensor many = zeros({1}, TensorOptions(DType::Float32, kGpu));
  scatter_add_(many, 0, zeros({4096}, TensorOptions(DType::Int64, kGpu)),
               ones({4096}, TensorOptions(DType::Float32, kGpu)));
  CHECK(many.cpu().item<double>() == 4096.0);
}

TEST_CASE("cuda: a bad index is refused with the CPU's words and writes nothing", "[gpu][index]") {
  if (no_gpu()) return;
  const Tensor a = sample(DType::Float32, {3, 4}, 25).cuda();
  CHECK_THROWS_WITH(index_select(a, 0, indices({0, 3}, {2}).cuda()),
                    Contains("index_select(): index 3 is out of bounds for dimension 0 with size 3"));
  CHECK_THROWS_WITH(gather(a, 1, indices({0, 4}, {1, 2}).cuda()),
                    Contains("gather(): index 4 is out of bounds for dimension 1 with size 4"));
  const Tensor before = a.cpu();
  const Tensor src = ones({1, 2}, TensorOptions(DType::Float32, kGpu));
  CHECK_THROWS_WITH(scatter_add_(a, 0, indices({1, -1}, {1, 2}).cuda(), src),
                    Contains("scatter_add(): index -1 is out of bounds"));
  CHECK(equal(a.cpu(), before));
  CHECK_THROWS_WITH(index_select(a, 0, indices({0}, {1})),
                    Contains("Expected all tensors to be on the same device, but found at least two devices, cuda:0 "
                             "and cpu"));
}

TEST_CASE("cuda: embedding and its gradient match the CPU", "[gpu][index]") {
  if (no_gpu()) return;
  const Tensor w_cpu = sample(DType::Float32, {6, 4}, 26);
  const Tensor idx = indices({5, 0, 5, 2, 1, 5}, {2, 3});
  Tensor w = autograd::set_requires_grad(w_cpu.clone());
  Tensor wg = autograd::set_requires_grad(w_cpu.cuda());
  const Tensor go = sample(DType::Float32, {2, 3, 4}, 27);
  const Tensor out = autograd::embedding(w, idx);
  const Tensor out_gpu = autograd::embedding(wg, idx.cuda());
  check_matches(out_gpu, out);
  autograd::backward(out, go);
  autograd::backward(out_gpu, go.cuda());
  check_matches(autograd::grad(wg), autograd::grad(w));
}

TEST_CASE("cuda: embedding_bag sum, mean and max with dense gradients match the CPU", "[gpu][index]") {
  if (no_gpu()) return;
  using autograd::EmbeddingBagMode;
  const Tensor input = indices({1, 4, 1, 5, 0, 3, 3}, {7});
  const Tensor offsets = indices({0, 2, 2, 5}, {4});  // the second bag is empty
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (auto mode : {EmbeddingBagMode::Sum, EmbeddingBagMode::Mean, EmbeddingBagMode::Max}) {
      INFO(dname(dt) << " mode " << static_cast<int>(mode));
      const Tensor w0 = sample(dt, {6, 5}, 28);
      Tensor w = autograd::set_requires_grad(w0.clone());
      Tensor wg = autograd::set_requires_grad(w0.cuda());
      const Tensor out = autograd::embedding_bag(w, input, offsets, mode);
      const Tensor out_gpu = autograd::embedding_bag(wg, input.cuda(), offsets.cuda(), mode);
      check_matches(out_gpu, out);
      const Tensor go = sample(dt, {4, 5}, 29);
      autograd::backward(out, go);
      autograd::backward(out_gpu, go.cuda());
      check_matches(autograd::grad(wg), autograd::grad(w), 4.0);  // atomics add in another order
    }
  }
}

TEST_CASE("cuda: embedding_bag's sparse gradients and per-sample weights match the CPU", "[gpu][index]") {
  if (no_gpu()) return;
  using autograd::EmbeddingBagMode;
  const Tensor input = indices({1, 4, 1, 5, 0}, {5});
  const Tensor offsets = indices({0, 2, 2}, {3});
  const Tensor w0 = sample(DType::Float64, {6, 3}, 30);
  const Tensor go = sample(DType::Float64, {3, 3}, 31);
  for (auto mode : {EmbeddingBagMode::Sum, EmbeddingBagMode::Mean}) {
    Tensor w = autograd::set_requires_grad(w0.clone());
    Tensor wg = autograd::set_requires_grad(w0.cuda());
    autograd::backward(autograd::embedding_bag(w, input, offsets, mode, Tensor(), true), go);
    autograd::backward(autograd::embedding_bag(wg, input.cuda(), offsets.cuda(), mode, Tensor(), true), go.cuda());
    REQUIRE(autograd::grad(wg).is_sparse());
    const Tensor dense_gpu = as_sparse(autograd::grad(wg)).to_dense();
    const Tensor dense_cpu = as_sparse(autograd::grad(w)).to_dense();
    CHECK(equal(dense_gpu.cpu(), dense_cpu));
  }
  Tensor w = autograd::set_requires_grad(w0.clone());
  Tensor wg = autograd::set_requires_grad(w0.cuda());
  const Tensor psw0 = from_vector<double>({0.5, -1, 2, 3, 1.5}, {5});
  Tensor psw = autograd::set_requires_grad(psw0.clone());
  Tensor pswg = autograd::set_requires_grad(psw0.cuda());
  autograd::backward(autograd::embedding_bag(w, input, offsets, EmbeddingBagMode::Sum, psw), go);
  autograd::backward(autograd::embedding_bag(wg, input.cuda(), offsets.cuda(), EmbeddingBagMode::Sum, pswg), go.cuda());
  check_matches(autograd::grad(wg), autograd::grad(w));
  check_matches(autograd::grad(pswg), autograd::grad(psw));
}

TEST_CASE("cuda: gelu and its gradient match the CPU", "[gpu][index]") {
  if (no_gpu()) return;
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16}) {
    INFO(dname(dt));
    const Tensor x0 = sample(dt, {7, 9}, 32);
    Tensor x = autograd::set_requires_grad(x0.clone());
    Tensor xg = autograd::set_requires_grad(x0.cuda());
    const Tensor y = autograd::gelu(x);
    const Tensor yg = autograd::gelu(xg);
    check_matches(yg, y);
    const Tensor go = sample(dt, {7, 9}, 33);
    autograd::backward(y, go);
    autograd::backward(yg, go.cuda());
    check_matches(autograd::grad(xg), autograd::grad(x));
  }
}

}  // namespace braid
