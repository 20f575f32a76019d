// Matrix products against a naive triple loop in double: every dtype, transposed / sliced / expanded
// operands (which BLAS must read in place or via a copy), mm_out into strided outputs, bmm, dot, mv,
// matmul's 1-D promotion and broadcast batch dims, empty shapes, and every error path.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "tensor/factory.h"
#include "tensor/ops/linalg.h"

namespace braid {
namespace {

Tensor random_tensor(const Shape& shape, DType dt, Generator& g) {
  if (dt == DType::Bool) return randint(0, 2, shape, DType::Int64, &g).to(DType::Bool);
  if (is_floating(dt)) return randn(shape, DType::Float64, &g).to(dt);
  if (dt == DType::UInt8) return randint(0, 6, shape, DType::Int64, &g).to(dt);
  return randint(-5, 6, shape, DType::Int64, &g).to(dt);
}

// Row-major [n, m] product of a [n, k] and b [k, m] given as row-major doubles.
std::vector<double> ref_mm(const std::vector<double>& a, const std::vector<double>& b, int64_t n, int64_t k,
                           int64_t m) {
  std::vector<double> c(static_cast<size_t>(n * m), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      double s = 0;
      for (int64_t x = 0; x < k; ++x) s += a[i * k + x] * b[x * m + j];
      c[i * m + j] = s;
    }
  }
  return c;
}

// The exact reference as the result dtype stores it: bool is "non-zero", narrow integers wrap.
double as_dtype(double v, DType dt) {
  const auto i = static_cast<int64_t>(v);
  switch (dt) {
    case DType::Bool: return v != 0 ? 1.0 : 0.0;
    case DType::UInt8: return static_cast<uint8_t>(i);
    case DType::Int8: return static_cast<int8_t>(i);
    case DType::Int32: return static_cast<int32_t>(i);
    default: return v;
  }
}

// Tolerance relative to the sum of |terms|, which bounds the accumulation error of any summation order.
double tol(DType dt) {
  switch (dt) {
    case DType::Float16: return 2e-3;
    case DType::BFloat16: return 1.6e-2;
    case DType::Float32: return 1e-5;
    case DType::Float64: return 1e-12;
    default: return 0;
  }
}

void check_product(const Tensor& got, const Tensor& a, const Tensor& b) {
  const int64_t n = a.size(0), k = a.size(1), m = b.size(1);
  REQUIRE(got.shape() == Shape{n, m});
  REQUIRE(got.dtype() == a.dtype());
  const auto av = to_vector<double>(a), bv = to_vector<double>(b);
  std::vector<double> absa(av.size()), absb(bv.size());
  for (size_t i = 0; i < av.size(); ++i) absa[i] = std::abs(av[i]);
  for (size_t i = 0; i < bv.size(); ++i) absb[i] = std::abs(bv[i]);
  const auto want = ref_mm(av, bv, n, k, m);
  const auto scale = ref_mm(absa, absb, n, k, m);
  const auto g = to_vector<double>(got);
  for (size_t i = 0; i < g.size(); ++i) {
    INFO(a.describe() << " x " << b.describe() << " element " << i << ": got " << g[i] << ", want " << want[i]);
    CHECK(std::abs(g[i] - as_dtype(want[i], a.dtype())) <= tol(a.dtype()) * (scale[i] + 1));
  }
}

}  // namespace

TEST_CASE("linalg: mm matches a naive loop for every dtype", "[linalg]") {
  Generator g(11);
  for (DType dt : kRealDTypes) {
    for (auto [n, k, m] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {2, 3, 4}, {7, 5, 3}, {16, 33, 9}}) {
      INFO(dtype_name(dt) << " " << n << "x" << k << " @ " << k << "x" << m);
      const Tensor a = random_tensor({n, k}, dt, g);
      const Tensor b = random_tensor({k, m}, dt, g);
      check_product(mm(a, b), a, b);
      check_product(matmul(a, b), a, b);
    }
  }
}

TEST_CASE("linalg: mm reads transposed, sliced and expanded operands", "[linalg]") {
  Generator g(12);
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::Int32}) {
    INFO(dtype_name(dt));
    const Tensor a = random_tensor({6, 5}, dt, g);   // used as [6, 5] and a^T [5, 6]
    const Tensor b = random_tensor({5, 7}, dt, g);
    const Tensor bt = random_tensor({7, 5}, dt, g);  // bt^T is [5, 7]
    const Tensor at = random_tensor({5, 6}, dt, g);  // at^T is [6, 5]
    check_product(mm(a, b), a, b);
    check_product(mm(at.t(), b), at.t(), b);
    check_product(mm(a, bt.t()), a, bt.t());
    check_product(mm(at.t(), bt.t()), at.t(), bt.t());
    // Row slices (leading dimension larger than the row) and stepped slices (no unit stride: copied).
    const Tensor wide = random_tensor({6, 9}, dt, g);
    const Tensor rows = wide.narrow(1, 2, 5);
    check_product(mm(rows, b), rows, b);
    const Tensor stepped = random_tensor({12, 10}, dt, g).slice(0, 0, 12, 2).slice(1, 1, 10, 2);
    REQUIRE(stepped.shape() == Shape{6, 5});
    check_product(mm(stepped, b), stepped, b);
    check_product(mm(a, stepped.t().slice(1, 0, 6)), a, stepped.t().slice(1, 0, 6));
    // Transposed slices: the columns are contiguous, with a leading dimension beyond the row count.
    const Tensor tslice_a = random_tensor({5, 9}, dt, g).narrow(1, 2, 6).t();  // [6, 5], strides (1, 9)
    const Tensor tslice_b = random_tensor({7, 8}, dt, g).narrow(1, 1, 5).t();  // [5, 7], strides (1, 8)
    check_product(mm(tslice_a, b), tslice_a, b);
    check_product(mm(a, tslice_b), a, tslice_b);
    check_product(mm(tslice_a, tslice_b), tslice_a, tslice_b);
    // Expanded operands have zero strides.
    const Tensor col = random_tensor({6, 1}, dt, g).expand({6, 5});
    check_product(mm(col, b), col, b);
    const Tensor row = random_tensor({1, 7}, dt, g).expand({5, 7});
    check_product(mm(a, row), a, row);
    // Vectors as matrices: [1, k] x [k, 1] and [n, 1] x [1, m].
    const Tensor r1 = random_tensor({1, 5}, dt, g), c1 = random_tensor({5, 1}, dt, g);
    check_product(mm(r1, c1), r1, c1);
    check_product(mm(c1, r1), c1, r1);
  }
}

TEST_CASE("linalg: mm_out writes into preallocated, strided and aliased outputs", "[linalg]") {
  Generator g(13);
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Int64}) {
    INFO(dtype_name(dt));
    const Tensor a = random_tensor({4, 3}, dt, g), b = random_tensor({3, 5}, dt, g);
    Tensor out = Tensor::empty({4, 5}, dt);
    const void* before = out.data_ptr();
    const uint64_t version = out.version();
    CHECK(&mm_out(out, a, b) == &out);
    CHECK(out.data_ptr() == before);
    CHECK(out.version() > version);
    check_product(out, a, b);
    // A column-major output (a transposed view) and a row slice of a wider buffer.
    const Tensor colmajor = Tensor::empty({5, 4}, dt).t();
    mm_out(colmajor, a, b);
    check_product(colmajor, a, b);
    const Tensor buffer = zeros({4, 8}, dt);
    mm_out(buffer.narrow(1, 1, 5), a, b);
    check_product(buffer.narrow(1, 1, 5), a, b);
    CHECK(to_vector<double>(buffer.select(1, 0)) == std::vector<double>(4, 0.0));
    CHECK(to_vector<double>(buffer.narrow(1, 6, 2).contiguous()) == std::vector<double>(8, 0.0));
    // A stepped output (no unit stride) goes through a temporary.
    const Tensor colbuf = zeros({5, 7}, dt);
    mm_out(colbuf.narrow(1, 1, 4).t(), a, b);  // column-major with leading dimension 7
    check_product(colbuf.narrow(1, 1, 4).t(), a, b);
    CHECK(to_vector<double>(colbuf.select(1, 0)) == std::vector<double>(5, 0.0));
    const Tensor stepped = zeros({8, 10}, dt).slice(0, 0, 8, 2).slice(1, 0, 10, 2);
    mm_out(stepped, a, b);
    check_product(stepped, a, b);
    // out aliasing an input: the product is computed before anything is overwritten.
    const Tensor sq = random_tensor({4, 4}, dt, g);
    const Tensor sq_copy = sq.clone();
    mm_out(sq, sq, sq_copy);
    check_product(sq, sq_copy, sq_copy);
  }
}

TEST_CASE("linalg: bmm, dot, mv", "[linalg]") {
  Generator g(14);
  for (DType dt : kRealDTypes) {
    INFO(dtype_name(dt));
    const Tensor a = random_tensor({3, 4, 5}, dt, g), b = random_tensor({3, 5, 2}, dt, g);
    const Tensor c = bmm(a, b);
    REQUIRE(c.shape() == Shape{3, 4, 2});
    for (int64_t i = 0; i < 3; ++i) check_product(c.select(0, i), a.select(0, i), b.select(0, i));
    const Tensor bt = random_tensor({3, 2, 5}, dt, g).transpose(1, 2);
    const Tensor c2 = bmm(a, bt);
    for (int64_t i = 0; i < 3; ++i) check_product(c2.select(0, i), a.select(0, i), bt.select(0, i));

    const Tensor u = random_tensor({7}, dt, g), v = random_tensor({14}, dt, g).slice(0, 0, 14, 2);
    const Tensor d = dot(u, v);
    CHECK(d.shape() == Shape{});
    CHECK(d.dtype() == dt);
    check_product(d.view({1, 1}), u.view({1, 7}), v.unsqueeze(1));
    check_product(matmul(u, v).view({1, 1}), u.view({1, 7}), v.unsqueeze(1));

    const Tensor mat = random_tensor({4, 7}, dt, g);
    const Tensor r = mv(mat, v);
    CHECK(r.shape() == Shape{4});
    check_product(r.view({4, 1}), mat, v.unsqueeze(1));
    check_product(mv(mat.t().t(), u).view({4, 1}), mat, u.unsqueeze(1));
  }
}

TEST_CASE("linalg: matmul promotes 1-D operands and broadcasts batch dims", "[linalg]") {
  Generator g(15);
  for (DType dt : {DType::Float32, DType::Float64, DType::Int64, DType::Float16}) {
    INFO(dtype_name(dt));
    const Tensor v3 = random_tensor({3}, dt, g), v4 = random_tensor({4}, dt, g);
    const Tensor m34 = random_tensor({3, 4}, dt, g);
    // 1-D x 2-D: a row vector, then the dim is removed.
    const Tensor r = matmul(v3, m34);
    CHECK(r.shape() == Shape{4});
    check_product(r.view({1, 4}), v3.view({1, 3}), m34);
    // 2-D x 1-D.
    CHECK(matmul(m34, v4).shape() == Shape{3});
    check_product(matmul(m34, v4).view({3, 1}), m34, v4.view({4, 1}));
    // N-D x 2-D folds the batch into rows; N-D x 1-D drops the last dim.
    const Tensor b = random_tensor({2, 5, 3}, dt, g);
    const Tensor p = matmul(b, m34);
    REQUIRE(p.shape() == Shape{2, 5, 4});
    for (int64_t i = 0; i < 2; ++i) check_product(p.select(0, i), b.select(0, i), m34);
    const Tensor pv = matmul(b, v3);
    REQUIRE(pv.shape() == Shape{2, 5});
    for (int64_t i = 0; i < 2; ++i) check_product(pv.select(0, i).unsqueeze(1), b.select(0, i), v3.unsqueeze(1));
    // 1-D x N-D.
    const Tensor w = random_tensor({2, 3, 6}, dt, g);
    const Tensor q = matmul(v3, w);
    REQUIRE(q.shape() == Shape{2, 6});
    for (int64_t i = 0; i < 2; ++i) check_product(q.select(0, i).unsqueeze(0), v3.unsqueeze(0), w.select(0, i));
    // 2-D x N-D and broadcast batch dims: [2, 1, 5, 3] x [4, 3, 2] -> [2, 4, 5, 2].
    const Tensor x = random_tensor({2, 1, 5, 3}, dt, g), y = random_tensor({4, 3, 2}, dt, g);
    const Tensor z = matmul(x, y);
    REQUIRE(z.shape() == Shape{2, 4, 5, 2});
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 4; ++j) {
        check_product(z.select(0, i).select(0, j), x.select(0, i).select(0, 0), y.select(0, j));
      }
    }
    const Tensor yt = random_tensor({4, 2, 3}, dt, g).transpose(1, 2);  // non-contiguous batch operand
    const Tensor z2 = matmul(m34.t(), yt);
    REQUIRE(z2.shape() == Shape{4, 4, 2});
    for (int64_t j = 0; j < 4; ++j) check_product(z2.select(0, j), m34.t(), yt.select(0, j));
  }
}

TEST_CASE("linalg: empty shapes", "[linalg]") {
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32}) {
    INFO(dtype_name(dt));
    // k == 0 gives zeros, not uninitialised memory.
    const Tensor z = mm(ones({3, 0}, dt), ones({0, 4}, dt));
    CHECK(z.shape() == Shape{3, 4});
    CHECK(to_vector<double>(z) == std::vector<double>(12, 0.0));
    CHECK(mm(ones({0, 3}, dt), ones({3, 4}, dt)).shape() == Shape{0, 4});
    CHECK(mm(ones({2, 3}, dt), ones({3, 0}, dt)).shape() == Shape{2, 0});
    CHECK(dot(ones({0}, dt), ones({0}, dt)).item<double>() == 0.0);
    CHECK(bmm(ones({0, 2, 3}, dt), ones({0, 3, 4}, dt)).shape() == Shape{0, 2, 4});
    CHECK(matmul(ones({2, 0, 3}, dt), ones({3, 4}, dt)).shape() == Shape{2, 0, 4});
    const Tensor zk = matmul(ones({2, 3, 0}, dt), ones({0, 4}, dt));
    CHECK(zk.shape() == Shape{2, 3, 4});
    CHECK(to_vector<double>(zk) == std::vector<double>(24, 0.0));
    CHECK(matmul(ones({2, 3, 0}, dt), ones({2, 0, 4}, dt)).shape() == Shape{2, 3, 4});
    CHECK(matmul(ones({0}, dt), ones({0, 4}, dt)).shape() == Shape{4});
  }
}

TEST_CASE("linalg: float32 products agree with float64 on larger sizes", "[linalg]") {
  Generator g(16);
  const Tensor a = randn({129, 257}, DType::Float32, &g), b = randn({257, 65}, DType::Float32, &g);
  check_product(mm(a, b), a, b);
  check_product(mm(b.t(), a.t()), b.t(), a.t());
}

TEST_CASE("linalg: errors name the op and both operands", "[linalg]") {
  const Tensor a = zeros({2, 3}), b = zeros({4, 5});
  REQUIRE_THROWS_WITH(mm(a, b), Catch::Contains("mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)") &&
                                    Catch::Contains("float32[2, 3] cpu") && Catch::Contains("float32[4, 5] cpu"));
  REQUIRE_THROWS_WITH(mm(a, zeros({3, 2}, DType::Float64)),
                      Catch::Contains("expected scalar type Float but found Double") &&
                          Catch::Contains("float32[2, 3] cpu") && Catch::Contains("float64[3, 2] cpu"));
  REQUIRE_THROWS_WITH(mm(zeros({3}), a), Catch::Contains("mm: self must be a matrix"));
  REQUIRE_THROWS_WITH(mm(a, zeros({3})), Catch::Contains("mm: mat2 must be a matrix"));
  REQUIRE_THROWS_WITH(mm_out(zeros({2, 2}), a, zeros({3, 5})),
                      Catch::Contains("mm_out: out has shape [2, 2] but the product") && Catch::Contains("[2, 5]"));
  REQUIRE_THROWS_WITH(mm_out(zeros({2, 5}, DType::Float64), a, zeros({3, 5})),
                      Catch::Contains("mm_out: expected out to have scalar type Float but found Double"));
  REQUIRE_THROWS_WITH(mm_out(zeros({2, 5}), a, b), Catch::Contains("mat1 and mat2 shapes cannot be multiplied"));
  REQUIRE_THROWS_WITH(bmm(zeros({2, 2, 3}), zeros({3, 3, 4})),
                      Catch::Contains("Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: "
                                      "[3, 3]"));
  REQUIRE_THROWS_WITH(bmm(a, a), Catch::Contains("batch1 must be a 3D tensor"));
  REQUIRE_THROWS_WITH(bmm(zeros({1, 2, 3}, DType::Int32), zeros({1, 3, 2})),
                      Catch::Contains("bmm: expected scalar type Int but found Float"));
  REQUIRE_THROWS_WITH(dot(zeros({3}), zeros({4})), Catch::Contains("inconsistent tensor size, expected tensor [3] and "
                                                                   "src [4] to have the same number of elements"));
  REQUIRE_THROWS_WITH(dot(a, zeros({3})), Catch::Contains("1D tensors expected, but got 2D and 1D tensors"));
  REQUIRE_THROWS_WITH(dot(zeros({3}), zeros({3}, DType::Float64)),
                      Catch::Contains("expected both vectors to have same dtype, but found Float and Double"));
  REQUIRE_THROWS_WITH(mv(a, zeros({4})), Catch::Contains("size mismatch, got mat (2x3), vec (4)"));
  REQUIRE_THROWS_WITH(mv(a, a), Catch::Contains("mv: vector + matrix @ vector expected, got 2D and 2D"));
  REQUIRE_THROWS_WITH(mv(a, zeros({3}, DType::Int64)),
                      Catch::Contains("mv: expected scalar type Float but found Long"));
  REQUIRE_THROWS_WITH(mm(a, Tensor()), Catch::Contains("mm: mat1 and mat2 must be defined tensors"));
  REQUIRE_THROWS_WITH(mm_out(Tensor(), a, zeros({3, 2})), Catch::Contains("mm_out: out must be a defined tensor on cpu"));
  REQUIRE_THROWS_WITH(dot(Tensor(), a), Catch::Contains("dot: arguments must be defined tensors"));
  REQUIRE_THROWS_WITH(matmul(a, Tensor()), Catch::Contains("matmul: arguments must be defined tensors"));
  REQUIRE_THROWS_WITH(matmul(scalar_tensor(1.0), a),
                      Catch::Contains("both arguments to matmul need to be at least 1D, but they are 0D and 2D"));
  REQUIRE_THROWS_WITH(matmul(zeros({2, 2, 3}), zeros({2, 4, 5})),
                      Catch::Contains("matmul: mat1 and mat2 shapes cannot be multiplied (2x2x3 and 2x4x5)"));
  REQUIRE_THROWS_WITH(matmul(zeros({2, 2, 3}), zeros({3, 3, 5})), Catch::Contains("matmul"));
  REQUIRE_THROWS_WITH(matmul(zeros({2, 2, 3}), zeros({2, 3}, DType::Float64)),
                      Catch::Contains("expected scalar type Float but found Double"));
}

}  // namespace braid
