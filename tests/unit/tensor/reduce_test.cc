// Reductions against naive reference loops (in double, over the row-major elements) for every dtype:
// dims subsets, keepdim, negative dims, 0-dim and empty inputs, non-contiguous layouts, NaN handling,
// 16-bit and float32 accuracy, and every error path.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>

#include "tensor/factory.h"
#include "tensor/ops/reduce.h"

namespace braid {
namespace {

using Group = std::vector<double>;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor random_tensor(const Shape& shape, DType dt, Generator& g, int64_t lo = -9, int64_t hi = 10) {
  if (dt == DType::Bool) return randint(0, 2, shape, DType::Int64, &g).to(DType::Bool);
  if (is_floating(dt)) return randn(shape, DType::Float64, &g).to(dt);
  if (dt == DType::UInt8) return randint(0, hi, shape, DType::Int64, &g).to(dt);
  return randint(lo, hi, shape, DType::Int64, &g).to(dt);
}

// The elements of `shape` grouped by output position (row-major over the kept dims); each group lists
// its elements in row-major order of the reduced dims. `dims` empty reduces everything.
std::vector<Group> group_by(const std::vector<double>& x, const Shape& shape, Shape dims) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(shape.size(), dims.empty());
  for (int64_t d : dims) reduced[static_cast<size_t>(d < 0 ? d + nd : d)] = true;
  int64_t groups = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduced[d]) groups *= shape[d];
  }
  std::vector<Group> out(static_cast<size_t>(groups));
  std::vector<int64_t> idx(shape.size(), 0);
  for (size_t flat = 0; flat < x.size(); ++flat) {
    int64_t g = 0;
    for (int64_t d = 0; d < nd; ++d) {
      if (!reduced[d]) g = g * shape[d] + idx[d];
    }
    out[static_cast<size_t>(g)].push_back(x[flat]);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::vector<double> map_groups(const std::vector<Group>& groups, const std::function<double(const Group&)>& f) {
  std::vector<double> r;
  for (const auto& g : groups) r.push_back(f(g));
  return r;
}

double ref_sum(const Group& g) {
  double s = 0;
  for (double v : g) s += v;
  return s;
}
double ref_prod(const Group& g) {
  double s = 1;
  for (double v : g) s *= v;
  return s;
}
double ref_max(const Group& g) {
  double m = g.at(0);
  for (double v : g) {
    if (std::isnan(v)) return v;
    m = std::max(m, v);
  }
  return m;
}
double ref_min(const Group& g) {
  double m = g.at(0);
  for (double v : g) {
    if (std::isnan(v)) return v;
    m = std::min(m, v);
  }
  return m;
}
double ref_argmax(const Group& g, bool is_max) {
  size_t best = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i])) return static_cast<double>(i);
    if (is_max ? g[i] > g[best] : g[i] < g[best]) best = i;
  }
  return static_cast<double>(best);
}
double ref_norm(const Group& g, double p) {
  if (std::isinf(p)) {
    double m = p > 0 ? 0.0 : std::numeric_limits<double>::infinity();
    for (double v : g) m = p > 0 ? std::max(m, std::abs(v)) : std::min(m, std::abs(v));
    return m;
  }
  double s = 0;
  for (double v : g) s += p == 0 ? (v != 0) : std::pow(std::abs(v), p);
  return p == 0 ? s : std::pow(s, 1.0 / p);
}

// One unit in the last place, relative, of each dtype: results computed in a wider type and rounded
// once are within half of it.
double rel_tol(DType dt) {
  switch (dt) {
    case DType::Float16: return 1.0 / 1024;
    case DType::BFloat16: return 1.0 / 128;
    case DType::Float32: return 1e-6;
    case DType::Float64: return 1e-12;
    default: return 0;
  }
}

void check_values(const Tensor& got, const std::vector<double>& want, double rtol, double atol = 0) {
  const auto g = to_vector<double>(got);
  REQUIRE(g.size() == want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": got " << g[i] << ", want " << want[i]);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(g[i]));
    } else {
      CHECK(std::abs(g[i] - want[i]) <= rtol * std::abs(want[i]) + atol);
    }
  }
}

Shape reduced_shape(const Shape& shape, const Shape& dims, bool keepdim) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  Shape out;
  for (int64_t d = 0; d < nd; ++d) {
    bool r = dims.empty();
    for (int64_t x : dims) r = r || (x < 0 ? x + nd : x) == d;
    if (!r) out.push_back(shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

const std::vector<Shape> kDimSets = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {2, 0}, {-3, -2}, {0, 1, 2}};

}  // namespace

TEST_CASE("reduce: sum over dims matches a naive loop for every dtype", "[reduce]") {
  Generator g(1);
  for (DType dt : kRealDTypes) {
    const Tensor a = random_tensor({3, 4, 5}, dt, g);
    const auto x = to_vector<double>(a);
    for (const Shape& dims : kDimSets) {
      for (bool keepdim : {false, true}) {
        INFO(dtype_name(dt) << " dims " << shape_str(dims) << " keepdim " << keepdim);
        const Tensor s = sum(a, dims, keepdim);
        CHECK(s.dtype() == (is_floating(dt) ? dt : DType::Int64));
        CHECK(s.shape() == reduced_shape(a.shape(), dims, keepdim));
        CHECK(s.is_contiguous());
        check_values(s, map_groups(group_by(x, a.shape(), dims), ref_sum), rel_tol(dt),
                     dt == DType::Float16 ? 1e-7 : 0);
      }
    }
  }
}

TEST_CASE("reduce: prod, amax, amin, all and any match naive loops for every dtype", "[reduce]") {
  Generator g(2);
  for (DType dt : kRealDTypes) {
    const Tensor a = random_tensor({2, 3, 4}, dt, g, -3, 4);
    const auto x = to_vector<double>(a);
    for (const Shape& dims : kDimSets) {
      for (bool keepdim : {false, true}) {
        INFO(dtype_name(dt) << " dims " << shape_str(dims) << " keepdim " << keepdim);
        const auto groups = group_by(x, a.shape(), dims);
        const Shape shape = reduced_shape(a.shape(), dims, keepdim);
        const Tensor p = prod(a, dims, keepdim);
        CHECK(p.dtype() == (is_floating(dt) ? dt : DType::Int64));
        CHECK(p.shape() == shape);
        check_values(p, map_groups(groups, ref_prod), 4 * rel_tol(dt), dt == DType::Float16 ? 1e-7 : 0);
        const Tensor mx = amax(a, dims, keepdim);
        const Tensor mn = amin(a, dims, keepdim);
        CHECK(mx.dtype() == dt);
        CHECK(mn.shape() == shape);
        check_values(mx, map_groups(groups, ref_max), 0);
        check_values(mn, map_groups(groups, ref_min), 0);
        const Tensor al = all(a, dims, keepdim);
        const Tensor an = any(a, dims, keepdim);
        CHECK(al.dtype() == DType::Bool);
        CHECK(an.shape() == shape);
        check_values(al, map_groups(groups, [](const Group& gr) {
                       for (double v : gr) {
                         if (v == 0) return 0.0;
                       }
                       return 1.0;
                     }), 0);
        check_values(an, map_groups(groups, [](const Group& gr) {
                       for (double v : gr) {
                         if (v != 0) return 1.0;
                       }
                       return 0.0;
                     }), 0);
      }
    }
  }
}

TEST_CASE("reduce: mean and norm match naive loops for floating dtypes", "[reduce]") {
  Generator g(3);
  for (DType dt : {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) {
    const Tensor a = random_tensor({3, 4, 5}, dt, g);
    const auto x = to_vector<double>(a);
    for (const Shape& dims : kDimSets) {
      for (bool keepdim : {false, true}) {
        INFO(dtype_name(dt) << " dims " << shape_str(dims) << " keepdim " << keepdim);
        const auto groups = group_by(x, a.shape(), dims);
        const Tensor m = mean(a, dims, keepdim);
        CHECK(m.dtype() == dt);
        CHECK(m.shape() == reduced_shape(a.shape(), dims, keepdim));
        const auto ref_mean = [](const Group& gr) { return ref_sum(gr) / static_cast<double>(gr.size()); };
        check_values(m, map_groups(groups, ref_mean), rel_tol(dt), dt == DType::Float16 ? 1e-7 : 0);
        for (double p : {2.0, 1.0, 0.0, 3.0, 0.5, kInf, -kInf}) {
          INFO("p " << p);
          const Tensor n = norm(a, p, dims, keepdim);
          CHECK(n.dtype() == dt);
          check_values(n, map_groups(groups, [p](const Group& gr) { return ref_norm(gr, p); }), 2 * rel_tol(dt));
        }
      }
    }
  }
}

TEST_CASE("reduce: max/min with indices and argmax/argmin over a dim, for every dtype", "[reduce]") {
  Generator g(4);
  for (DType dt : kRealDTypes) {
    const Tensor a = random_tensor({3, 4, 5}, dt, g, -3, 4);  // small range: many ties
    const auto x = to_vector<double>(a);
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      for (bool keepdim : {false, true}) {
        INFO(dtype_name(dt) << " dim " << dim << " keepdim " << keepdim);
        const auto groups = group_by(x, a.shape(), {dim});
        const Shape shape = reduced_shape(a.shape(), {dim}, keepdim);
        for (bool is_max : {true, false}) {
          const ValuesIndices r = is_max ? max(a, dim, keepdim) : min(a, dim, keepdim);
          CHECK(r.values.dtype() == dt);
          CHECK(r.indices.dtype() == DType::Int64);
          CHECK(r.values.shape() == shape);
          CHECK(r.indices.shape() == shape);
          check_values(r.values, map_groups(groups, is_max ? ref_max : ref_min), 0);
          const auto want_idx = map_groups(groups, [is_max](const Group& gr) { return ref_argmax(gr, is_max); });
          check_values(r.indices, want_idx, 0);
          const Tensor ai = is_max ? argmax(a, dim, keepdim) : argmin(a, dim, keepdim);
          CHECK(ai.shape() == shape);
          check_values(ai, want_idx, 0);
        }
      }
    }
    // Over the flattened tensor.
    CHECK(argmax(a).shape() == Shape{});
    CHECK(argmax(a, std::nullopt, true).shape() == Shape{1, 1, 1});
    CHECK(argmax(a).item<int64_t>() == static_cast<int64_t>(ref_argmax(x, true)));
    CHECK(argmin(a).item<int64_t>() == static_cast<int64_t>(ref_argmax(x, false)));
    CHECK(max(a).shape() == Shape{});
    CHECK(max(a).item<double>() == ref_max(x));
    CHECK(min(a).item<double>() == ref_min(x));
  }
}

TEST_CASE("reduce: ties pick the first index and NaN propagates", "[reduce]") {
  const Tensor t = from_vector<float>({1, 3, 3, 0, 0, 1}, {6});
  CHECK(argmax(t).item<int64_t>() == 1);
  CHECK(argmin(t).item<int64_t>() == 3);
  CHECK(max(t, 0).indices.item<int64_t>() == 1);
  CHECK(min(t, 0).indices.item<int64_t>() == 3);
  for (DType dt : {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) {
    INFO(dtype_name(dt));
    const Tensor n = from_vector<double>({1, kNaN, 5, kNaN, -2}, {5}).to(dt);
    CHECK(std::isnan(max(n).item<double>()));
    CHECK(std::isnan(min(n).item<double>()));
    CHECK(std::isnan(amax(n, {0}).item<double>()));
    CHECK(std::isnan(amin(n).item<double>()));
    CHECK(argmax(n).item<int64_t>() == 1);
    CHECK(argmin(n).item<int64_t>() == 1);
    CHECK(max(n, 0).indices.item<int64_t>() == 1);
    CHECK(std::isnan(max(n, 0).values.item<double>()));
    CHECK(std::isnan(sum(n).item<double>()));
    CHECK(std::isnan(norm(n, kInf).item<double>()));
    CHECK(all(n).item<bool>() == true);  // NaN is non-zero
  }
  CHECK(std::isnan(max(from_vector<double>({1, kNaN}, {2}).to(DType::Float32)).item<float>()));
}

TEST_CASE("reduce: non-contiguous inputs (transposed, stepped, expanded)", "[reduce]") {
  Generator g(5);
  for (DType dt : kRealDTypes) {
    INFO(dtype_name(dt));
    const Tensor base = random_tensor({4, 6, 5}, dt, g, -3, 4);
    const std::vector<Tensor> views = {base.transpose(0, 2), base.slice(1, 1, 6, 2),
                                       base.slice(2, 0, 5, 3).permute({2, 0, 1}),
                                       base.select(1, 2).unsqueeze(1).expand({4, 3, 5})};
    for (const Tensor& v : views) {
      REQUIRE(!v.is_contiguous());
      const auto x = to_vector<double>(v);
      for (const Shape& dims : std::vector<Shape>{{}, {0}, {1}, {-1}, {0, 2}}) {
        const auto groups = group_by(x, v.shape(), dims);
        check_values(sum(v, dims), map_groups(groups, ref_sum), rel_tol(dt), dt == DType::Float16 ? 1e-7 : 0);
        check_values(amax(v, dims, true), map_groups(groups, ref_max), 0);
        check_values(any(v, dims), map_groups(groups, [](const Group& gr) {
                       for (double e : gr) {
                         if (e != 0) return 1.0;
                       }
                       return 0.0;
                     }), 0);
      }
      const auto ref_argmin = [](const Group& gr) { return ref_argmax(gr, false); };
      check_values(argmin(v, 1), map_groups(group_by(x, v.shape(), {1}), ref_argmin), 0);
    }
  }
}

TEST_CASE("reduce: 0-dim and empty inputs", "[reduce]") {
  const Tensor s = scalar_tensor(2.5, DType::Float32);
  for (const Shape& dims : std::vector<Shape>{{}, {0}, {-1}}) {
    for (bool keepdim : {false, true}) {
      CHECK(sum(s, dims, keepdim).shape() == Shape{});
      CHECK(sum(s, dims, keepdim).item<float>() == 2.5f);
      CHECK(mean(s, dims, keepdim).item<float>() == 2.5f);
      CHECK(amax(s, dims, keepdim).item<float>() == 2.5f);
      CHECK(norm(s, 2.0, dims, keepdim).item<float>() == 2.5f);
    }
  }
  CHECK(max(s, 0).values.item<float>() == 2.5f);
  CHECK(max(s, -1, true).indices.item<int64_t>() == 0);
  CHECK(argmax(s).item<int64_t>() == 0);
  CHECK(argmax(s, 0).shape() == Shape{});

  const Tensor e = zeros({2, 0, 3});
  CHECK(sum(e).item<float>() == 0.0f);
  CHECK(sum(e, {1}).shape() == Shape{2, 3});
  CHECK(to_vector<float>(sum(e, {1})) == std::vector<float>(6, 0.0f));
  CHECK(to_vector<float>(prod(e, {1}, true)) == std::vector<float>(6, 1.0f));
  CHECK(prod(e, {1}, true).shape() == Shape{2, 1, 3});
  CHECK(std::isnan(mean(e).item<float>()));
  CHECK(norm(e).item<float>() == 0.0f);
  CHECK(all(e).item<bool>() == true);
  CHECK(any(e).item<bool>() == false);
  CHECK(sum(e, {0}).shape() == Shape{0, 3});
  CHECK(amax(e, {2}).shape() == Shape{2, 0});  // reducing a non-empty dim of an empty tensor is fine
  CHECK(max(e, 0).values.shape() == Shape{0, 3});
  CHECK(argmax(e, 2, true).shape() == Shape{2, 0, 1});
  CHECK(sum(zeros({0}, DType::Int32)).dtype() == DType::Int64);
}

TEST_CASE("reduce: 16-bit floats accumulate in float32 and round once", "[reduce]") {
  // Accumulating in the 16-bit type would stall at 2048 (float16) and 256 (bfloat16).
  CHECK(sum(ones({4096}, DType::Float16)).item<float>() == 4096.0f);
  CHECK(sum(ones({4096}, DType::BFloat16)).item<float>() == 4096.0f);
  CHECK(mean(ones({4096}, DType::BFloat16)).item<float>() == 1.0f);
  CHECK(norm(ones({4096}, DType::Float16)).item<float>() == 64.0f);
  // A half sum beyond 65504 overflows only at the final rounding.
  CHECK(std::isinf(sum(full({2}, 60000.0, DType::Float16)).item<float>()));
  CHECK(mean(full({2}, 60000.0, DType::Float16)).item<float>() == 60000.0f);
  Generator g(6);
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    const Tensor a = random_tensor({10000}, dt, g);
    const auto x = to_vector<double>(a);
    const double want = ref_sum(x);
    // Rounding the exact sum once: within half an ulp (plus the float accumulator's small error).
    const double got = sum(a).item<double>();
    CHECK(std::abs(got - want) <= rel_tol(dt) * std::abs(want) + 1e-3);
  }
}

TEST_CASE("reduce: float32 sums of a million elements stay accurate", "[reduce]") {
  const int64_t n = 1 << 20;
  const Tensor a = full({n}, 0.1, DType::Float32);
  const double exact = static_cast<double>(n) * static_cast<double>(0.1f);
  CHECK(std::abs(sum(a).item<double>() - exact) <= 1e-6 * exact);
  CHECK(std::abs(mean(a).item<double>() - static_cast<double>(0.1f)) <= 1e-7);
  Generator g(7);
  const Tensor r = rand({n}, DType::Float32, &g);
  const auto x = to_vector<double>(r);
  CHECK(std::abs(sum(r).item<double>() - ref_sum(x)) <= 1e-6 * ref_sum(x));
  const Tensor m = r.view({1024, 1024});
  check_values(sum(m, {0}), map_groups(group_by(x, {1024, 1024}, {0}), ref_sum), 1e-6);
}

TEST_CASE("reduce: sum with an explicit dtype and integer wrap-around", "[reduce]") {
  const Tensor a = from_vector<int8_t>({100, 100, 100}, {3});
  CHECK(sum(a).item<int64_t>() == 300);
  CHECK(sum(a, {}, false, DType::Float32).dtype() == DType::Float32);
  CHECK(sum(a, {}, false, DType::Float32).item<float>() == 300.0f);
  CHECK(sum(from_vector<bool>({true, true, false}, {3})).item<int64_t>() == 2);
  CHECK(sum(from_vector<bool>({true, true, false}, {3})).dtype() == DType::Int64);
  CHECK(prod(from_vector<int32_t>({1 << 20, 1 << 20}, {2})).item<int64_t>() == (int64_t{1} << 40));
  const int64_t big = std::numeric_limits<int64_t>::max();
  CHECK(sum(from_vector<int64_t>({big, 1}, {2})).item<int64_t>() == std::numeric_limits<int64_t>::min());
  CHECK(sum(from_vector<float>({1.5f, 2.25f}, {2}), {}, false, DType::Float64).dtype() == DType::Float64);
}

TEST_CASE("reduce: errors name the op and the problem", "[reduce]") {
  const Tensor a = zeros({2, 3});
  REQUIRE_THROWS_WITH(sum(a, {1, 1}), Catch::Contains("dim 1 appears multiple times in the list of dims"));
  REQUIRE_THROWS_WITH(amax(a, {-1, 1}), Catch::Contains("dim 1 appears multiple times in the list of dims"));
  REQUIRE_THROWS_WITH(sum(a, {2}), Catch::Contains("sum: dimension out of range"));
  REQUIRE_THROWS_WITH(max(a, -3), Catch::Contains("dimension out of range"));
  REQUIRE_THROWS_WITH(mean(zeros({2}, DType::Int64)),
                      Catch::Contains("mean(): could not infer output dtype. Input dtype must be either a floating "
                                      "point or complex dtype") &&
                          Catch::Contains("Got: Long"));
  REQUIRE_THROWS_WITH(mean(zeros({2}, DType::Bool)), Catch::Contains("Got: Bool"));
  REQUIRE_THROWS_WITH(norm(zeros({2}, DType::Int32)), Catch::Contains("norm(): could not infer output dtype"));
  const Tensor e = zeros({2, 0});
  REQUIRE_THROWS_WITH(max(e, 1), Catch::Contains("max(): Expected reduction dim 1 to have non-zero size"));
  REQUIRE_THROWS_WITH(min(e, -1), Catch::Contains("min(): Expected reduction dim 1 to have non-zero size"));
  REQUIRE_THROWS_WITH(amax(e, {1}), Catch::Contains("amax(): Expected reduction dim 1 to have non-zero size"));
  REQUIRE_THROWS_WITH(amin(e, {0, 1}), Catch::Contains("amin(): Expected reduction dim 1 to have non-zero size"));
  REQUIRE_THROWS_WITH(argmax(e, 1), Catch::Contains("argmax(): Expected reduction dim 1 to have non-zero size"));
  REQUIRE_THROWS_WITH(max(e), Catch::Contains("max(): Expected reduction dim to be specified for input.numel() == 0"));
  REQUIRE_THROWS_WITH(amax(e), Catch::Contains("amax(): Expected reduction dim to be specified"));
  REQUIRE_THROWS_WITH(argmin(e), Catch::Contains("argmin(): Expected reduction dim to be specified"));
  REQUIRE_THROWS_WITH(norm(e, kInf, {1}), Catch::Contains("cannot compute the inf norm on an empty tensor"));
  REQUIRE_THROWS_AS(sum(Tensor()), InvalidArgument);
}

}  // namespace braid
