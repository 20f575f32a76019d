// complex64/complex128: names and promotion, the real views (torch.view_as_real / view_as_complex and
// their stride rules), conversions, the field arithmetic, sum and mean, printing as torch 1.13 prints,
// serialization, and the refusals of what has no meaning on complex numbers.
#include <catch2/catch.hpp>

#include <complex>

#include "tensor/compare.h"
#include "tensor/complex.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"
#include "tensor/print.h"
#include "tensor/serialize.h"

namespace braid {
namespace {

using c64 = std::complex<float>;
using c128 = std::complex<double>;
using Catch::Contains;

// A complex64 tensor from (real, imaginary) pairs.
Tensor cfloats(const std::vector<float>& parts, Shape shape) {
  shape.push_back(2);
  return view_as_complex(from_vector<float>(parts, shape));
}

TEST_CASE("complex dtypes: sizes, names, torch's type names and promotion", "[complex]") {
  CHECK(element_size(DType::Complex64) == 8);
  CHECK(element_size(DType::Complex128) == 16);
  CHECK(dtype_name(DType::Complex64) == "complex64");
  CHECK(torch_type_name(DType::Complex128) == "ComplexDouble");
  CHECK(dtype_from_name("complex128") == DType::Complex128);
  CHECK(dtype_from_name("cfloat") == DType::Complex64);
  CHECK(is_complex(DType::Complex64));
  CHECK_FALSE(is_floating(DType::Complex64));
  CHECK(real_dtype(DType::Complex128) == DType::Float64);
  CHECK(complex_dtype(DType::Float32) == DType::Complex64);
  // torch.promote_types: complex wins; complex64 with float64 widens to complex128.
  CHECK(promote_types(DType::Complex64, DType::Float32) == DType::Complex64);
  CHECK(promote_types(DType::Int64, DType::Complex64) == DType::Complex64);
  CHECK(promote_types(DType::Complex64, DType::Float64) == DType::Complex128);
  CHECK(promote_types(DType::Complex64, DType::Complex128) == DType::Complex128);
  CHECK(promote_types(DType::Bool, DType::Complex128) == DType::Complex128);
}

TEST_CASE("view_as_real and view_as_complex share storage and follow torch's stride rules", "[complex]") {
  const Tensor parts = from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor c = view_as_complex(parts);
  REQUIRE(c.dtype() == DType::Complex64);
  REQUIRE(c.shape() == Shape{3});
  CHECK(c.data<c64>()[1] == c64(3, 4));
  const Tensor r = view_as_real(c);
  CHECK(r.shape() == Shape{3, 2});
  CHECK(r.strides() == Shape{2, 1});
  r.select(1, 1).fill_(-1.0);  // every imaginary part, through the real view
  CHECK(c.data<c64>()[2] == c64(5, -1));
  CHECK_THAT(real(c).contiguous(), Catch::Predicate<Tensor>([](const Tensor& t) {
               return equal(t, from_vector<float>({1, 3, 5}, {3}));
             }));
  CHECK(equal(imag(c).contiguous(), from_vector<float>({-1, -1, -1}, {3})));
  // A narrowed complex view keeps its offset in elements of the parts.
  const Tensor tail = view_as_real(c.narrow(0, 1, 2));
  CHECK(tail.storage_offset() == 2);
  CHECK(tail.data<float>()[0] == 3.0f);

  CHECK_THROWS_WITH(view_as_real(parts), Contains("view_as_real is only supported for complex tensors"));
  CHECK_THROWS_WITH(view_as_complex(from_vector<float>({1, 2, 3}, {3})),
                    Contains("Tensor must have a last dimension of size 2"));
  CHECK_THROWS_WITH(view_as_complex(parts.t().contiguous().t()),
                    Contains("Tensor must have a last dimension with stride 1"));
  CHECK_THROWS_WITH(view_as_complex(from_vector<float>({1, 2, 3, 4, 5, 6}, {6}).narrow(0, 1, 4).view({2, 2})),
                    Contains("storage_offset divisible by 2"));
  CHECK_THROWS_WITH(view_as_complex(zeros({2, 2}, DType::Int64)), Contains("only supported for float and double"));
}

TEST_CASE("complex conversions: real to complex, complex to real keeps the real part", "[complex]") {
  const Tensor x = from_vector<double>({1.5, -2.0}, {2});
  const Tensor c = x.to(DType::Complex128);
  CHECK(c.data<c128>()[0] == c128(1.5, 0));
  const Tensor z = cfloats({1, 2, -3, 4}, {2});
  CHECK(equal(z.to(DType::Float32), from_vector<float>({1, -3}, {2})));
  CHECK(z.to(DType::Complex128).data<c128>()[1] == c128(-3, 4));
  CHECK(equal(z.to(DType::Bool), from_vector<bool>({true, true}, {2})));
  CHECK(full({2}, 2.5, DType::Complex64).data<c64>()[1] == c64(2.5f, 0));
  CHECK_THROWS_WITH(z.select(0, 0).item(), Contains("braid's Scalar holds no complex numbers"));
}

TEST_CASE("complex arithmetic: add (with alpha), sub, mul, div, neg, eq against std::complex", "[complex]") {
  const Tensor a = cfloats({1, 2, 3, -1}, {2});
  const Tensor b = cfloats({0.5f, -1, 2, 2}, {2});
  const c64 a0(1, 2), a1(3, -1), b0(0.5f, -1), b1(2, 2);
  CHECK(mul(a, b).data<c64>()[0] == a0 * b0);
  CHECK(mul(a, b).data<c64>()[1] == a1 * b1);
  CHECK(std::abs(div(a, b).data<c64>()[1] - a1 / b1) < 1e-6f);
  CHECK(add(a, b, 2).data<c64>()[0] == a0 + 2.0f * b0);
  CHECK(sub(a, b).data<c64>()[1] == a1 - b1);
  CHECK(neg(a).data<c64>()[1] == -a1);
  CHECK(mul(a, Scalar(2.0)).data<c64>()[0] == c64(2, 4));
  // float64 with complex64 promotes to complex128.
  const Tensor w = add(a, from_vector<double>({1, 1}, {2}));
  CHECK(w.dtype() == DType::Complex128);
  CHECK(w.data<c128>()[0] == c128(2, 2));
  CHECK(equal(eq(a, a), from_vector<bool>({true, true}, {2})));
  CHECK(equal(ne(a, b), from_vector<bool>({true, true}, {2})));
  Tensor acc = zeros({2}, DType::Complex64);
  acc.add_(a).mul_(b);
  CHECK(acc.data<c64>()[1] == a1 * b1);
  // As torch's canCast: complex128 results may land in complex64, complex ones never in real tensors.
  acc.add_(from_vector<float>({1, 1}, {2}).to(DType::Complex128));
  CHECK(acc.dtype() == DType::Complex64);
  CHECK_THROWS_WITH(zeros({2}).add_(a), Contains("can't be cast to the desired output type Float"));
}

TEST_CASE("complex reductions: sum and mean over all and some dims", "[complex]") {
  const Tensor z = cfloats({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2});
  CHECK(sum(z).data<c64>()[0] == c64(16, 20));
  CHECK(sum(z).dim() == 0);
  const Tensor rows = sum(z, {1});
  CHECK(rows.shape() == Shape{2});
  CHECK(rows.data<c64>()[1] == c64(12, 14));
  CHECK(sum(z, {0}, true).shape() == Shape{1, 2});
  CHECK(mean(z, {-1}).data<c64>()[0] == c64(2, 3));
  CHECK(mean(z.to(DType::Complex128)).data<c128>()[0] == c128(4, 5));
  CHECK(sum(cfloats({1, -1}, {})).data<c64>()[0] == c64(1, -1));  // a 0-dim tensor sums to itself
}

TEST_CASE("complex printing follows torch 1.13", "[complex][print]") {
  CHECK(to_string(cfloats({1, 2, 3, -4}, {2})) == "tensor([1.+2.j, 3.-4.j])");
  CHECK(to_string(cfloats({1.5f, 0.25f}, {1})) == "tensor([1.5000+0.2500j])");
  CHECK(to_string(cfloats({1, 2}, {1}).to(DType::Complex128)) == "tensor([1.+2.j], dtype=complex128)");
}

TEST_CASE("complex serialization round-trips both parts", "[complex][serialize]") {
  const Tensor z = cfloats({1, 2, 3, -4, 0.5f, 7}, {3}).to(DType::Complex128);
  const Tensor back = deserialize(serialize(z));
  CHECK(back.dtype() == DType::Complex128);
  CHECK(equal(back, z));
}

TEST_CASE("complex refusals: order, powers, bit operations, elementwise functions", "[complex]") {
  const Tensor z = cfloats({1, 2}, {1});
  CHECK_THROWS_WITH(lt(z, z), Contains("not implemented for 'ComplexFloat'"));
  CHECK_THROWS_WITH(maximum(z, z), Contains("not implemented for 'ComplexFloat'"));
  CHECK_THROWS_WITH(exp(z), Contains("not implemented for 'ComplexFloat'"));
  CHECK_THROWS_WITH(amax(z), Contains("not implemented for 'ComplexFloat'"));
  CHECK_THROWS_WITH(prod(z), Contains("not implemented for 'ComplexFloat'"));
}

}  // namespace
}  // namespace braid
