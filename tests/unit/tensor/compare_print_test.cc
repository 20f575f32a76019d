// allclose/equal, and PyTorch-style printing compared against exact strings (as torch 1.13 prints them,
// with "dtype=float64" for "dtype=torch.float64").
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>

#include "tensor/compare.h"
#include "tensor/cuda/device_api.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/print.h"

namespace braid {
namespace {

Tensor floats(const std::vector<float>& v, const Shape& shape = {}) { return from_vector<float>(v, shape); }

TEST_CASE("allclose: tolerances, NaN, infinities, broadcasting and dtypes", "[compare]") {
  const Tensor a = floats({1.0f, 2.0f, 3.0f});
  CHECK(allclose(a, a));
  CHECK(allclose(a, floats({1.0f, 2.0f, 3.00001f})));
  CHECK_FALSE(allclose(a, floats({1.0f, 2.0f, 3.001f})));
  CHECK(allclose(a, floats({1.0f, 2.0f, 3.001f}), 1e-3));
  CHECK(allclose(a, floats({1.0f, 2.0f, 3.1f}), 0.0, 0.11));
  CHECK_FALSE(allclose(a, floats({1.0f, 2.0f, 3.1f}), 0.0, 0.09));
  // rtol scales |b|, not |a|: |1 - 2| <= 0.5 * 2 but not <= 0.5 * 1.
  CHECK(allclose(floats({1.0f}), floats({2.0f}), 0.5, 0.0));
  CHECK_FALSE(allclose(floats({2.0f}), floats({1.0f}), 0.5, 0.0));

  const Tensor n = floats({1.0f, NAN});
  CHECK_FALSE(allclose(n, n));
  CHECK(allclose(n, n, 1e-5, 1e-8, /*equal_nan=*/true));
  CHECK_FALSE(allclose(n, floats({1.0f, 1.0f}), 1e-5, 1e-8, true));
  const Tensor inf = floats({INFINITY, -INFINITY});
  CHECK(allclose(inf, inf));
  CHECK_FALSE(allclose(inf, floats({INFINITY, INFINITY})));
  CHECK_FALSE(allclose(floats({1e30f}), floats({INFINITY}), 1.0, 1e30));

  CHECK(allclose(ones({2, 3}), ones({3})));
  CHECK(allclose(ones({2, 3}), scalar_tensor(1.0)));
  CHECK(allclose(arange(5), arange(5).to(DType::Float16)));
  CHECK(allclose(arange(6).view({2, 3}).t(), arange(6).view({2, 3}).t().contiguous()));
  CHECK(allclose(zeros({0, 3}), zeros({3})));
  REQUIRE_THROWS_WITH(allclose(ones({2, 3}), ones({4})),
                      Catch::Contains("allclose") && Catch::Contains("float32[2, 3]") && Catch::Contains("float32[4]"));
}

TEST_CASE("equal: shapes, values, dtypes", "[compare]") {
  const Tensor a = arange(6).view({2, 3});
  CHECK(equal(a, a.clone()));
  CHECK(equal(a, a.to(DType::Float64)));
  CHECK(equal(a.t(), a.t().contiguous()));
  CHECK_FALSE(equal(a, a.view({3, 2})));
  CHECK_FALSE(equal(a, a.view({1, 2, 3})));
  CHECK_FALSE(equal(a, a + 1));
  CHECK_FALSE(equal(floats({NAN}), floats({NAN})));
  CHECK(equal(from_vector<bool>({true, false}), from_vector<int64_t>({1, 0})));
  CHECK(equal(zeros({0}), zeros({0}, DType::Int32)));
}

TEST_CASE("print: small tensors", "[print]") {
  CHECK(to_string(from_vector<double>({1, 2, 3, 4}, {2, 2})) == "tensor([[1., 2.],\n        [3., 4.]], dtype=float64)");
  CHECK(to_string(scalar_tensor(3.5)) == "tensor(3.5000)");
  CHECK(to_string(scalar_tensor(7, DType::Int64)) == "tensor(7)");
  CHECK(to_string(scalar_tensor(7, DType::Int32)) == "tensor(7, dtype=int32)");
  CHECK(to_string(scalar_tensor(true, DType::Bool)) == "tensor(True)");
  CHECK(to_string(arange(5)) == "tensor([0, 1, 2, 3, 4])");
  CHECK(to_string(from_vector<int64_t>({1, -10, 100})) == "tensor([  1, -10, 100])");
  CHECK(to_string(from_vector<uint8_t>({1, 2})) == "tensor([1, 2], dtype=uint8)");
  CHECK(to_string(from_vector<bool>({true, false})) == "tensor([ True, False])");
  CHECK(to_string(from_vector<bool>({true, false, false, true}, {2, 2})) ==
        "tensor([[ True, False],\n        [False,  True]])");
  CHECK(to_string(floats({1.5f, -2.25f, NAN})) == "tensor([ 1.5000, -2.2500,     nan])");
  CHECK(to_string(floats({1.f, 10.f, 100.f})) == "tensor([  1.,  10., 100.])");
  CHECK(to_string(floats({1.f, INFINITY})) == "tensor([1., inf])");
  CHECK(to_string(floats({-INFINITY, NAN})) == "tensor([-inf, nan])");
  CHECK(to_string(zeros({2})) == "tensor([0., 0.])");
  CHECK(to_string(floats({1e-5f, 1.0f})) == "tensor([1.0000e-05, 1.0000e+00])");
  CHECK(to_string(floats({1e10f, 1.0f})) == "tensor([1.0000e+10, 1.0000e+00])");
  CHECK(to_string(floats({1.5f, 2.0f}).to(DType::Float16)) == "tensor([1.5000, 2.0000], dtype=float16)");
  CHECK(to_string(scalar_tensor(0.1, DType::BFloat16)) == "tensor(0.1001, dtype=bfloat16)");
  CHECK(to_string(arange(8).to(DType::Float32).view({2, 2, 2})) ==
        "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])");
  CHECK(to_string(arange(6).view({2, 3}).t()) == "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])");
}

TEST_CASE("print: empty tensors", "[print]") {
  CHECK(to_string(zeros({0})) == "tensor([])");
  CHECK(to_string(zeros({0, 3})) == "tensor([], size=(0, 3))");
  CHECK(to_string(zeros({0}, DType::Int64)) == "tensor([], dtype=int64)");
  CHECK(to_string(zeros({2, 0}, DType::Bool)) == "tensor([], size=(2, 0), dtype=bool)");
}

TEST_CASE("print: line wrapping and suffix placement", "[print]") {
  CHECK(to_string(arange(30).to(DType::Float32)) ==
        "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
        "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
        "        28., 29.])");
  // A suffix that would pass 80 columns goes on its own line.
  CHECK(to_string(add(arange(9), 0.5).to(DType::Float64)) ==
        "tensor([0.5000, 1.5000, 2.5000, 3.5000, 4.5000, 5.5000, 6.5000, 7.5000, 8.5000],\n"
        "       dtype=float64)");
}

TEST_CASE("print: summarised above 1000 elements", "[print]") {
  CHECK(to_string(arange(2000)) == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  CHECK(to_string(arange(1000)).find("...") == std::string::npos);
  CHECK(to_string(arange(2000).view({40, 50})) ==
        "tensor([[   0,    1,    2,  ...,   47,   48,   49],\n"
        "        [  50,   51,   52,  ...,   97,   98,   99],\n"
        "        [ 100,  101,  102,  ...,  147,  148,  149],\n"
        "        ...,\n"
        "        [1850, 1851, 1852,  ..., 1897, 1898, 1899],\n"
        "        [1900, 1901, 1902,  ..., 1947, 1948, 1949],\n"
        "        [1950, 1951, 1952,  ..., 1997, 1998, 1999]])");
  // Summaries read the printed elements through the strides of a non-contiguous tensor.
  CHECK(to_string(arange(2000).view({40, 50}).t()) ==
        "tensor([[   0,   50,  100,  ..., 1850, 1900, 1950],\n"
        "        [   1,   51,  101,  ..., 1851, 1901, 1951],\n"
        "        [   2,   52,  102,  ..., 1852, 1902, 1952],\n"
        "        ...,\n"
        "        [  47,   97,  147,  ..., 1897, 1947, 1997],\n"
        "        [  48,   98,  148,  ..., 1898, 1948, 1998],\n"
        "        [  49,   99,  149,  ..., 1899, 1949, 1999]])");
  // Only the printed elements decide the format: the hidden middle (1e-6) does not force scientific.
  Tensor t = full({2000}, 1.5);
  t.narrow(0, 10, 100).fill_(1e-6);
  CHECK(to_string(t) == "tensor([1.5000, 1.5000, 1.5000,  ..., 1.5000, 1.5000, 1.5000])");
}

TEST_CASE("print: operator<< and fmt", "[print]") {
  const Tensor t = ones({2, 3});
  std::ostringstream os;
  os << t;
  CHECK(os.str() == to_string(t));
  CHECK(fmt::format("{}", t) == "float32[2, 3] cpu");
  CHECK(fmt::format("[{:>20}]", t) == "[   float32[2, 3] cpu]");
  CHECK(fmt::format("{}", Tensor()) == "undefined tensor");
  CHECK(to_string(Tensor()) == "tensor(undefined)");
}

TEST_CASE("print: CUDA tensors name their device", "[print][cuda]") {
  if (cuda::device_count() == 0) {
    WARN("skipped: no CUDA device (" << cuda::unavailable_reason() << ")");
    return;
  }
  CHECK(to_string(floats({1.f, 2.f}).cuda()) == "tensor([1., 2.], device='cuda:0')");
  CHECK(to_string(floats({1.f}).to(DType::Float64).cuda()) == "tensor([1.], device='cuda:0', dtype=float64)");
}

}  // namespace
}  // namespace braid
