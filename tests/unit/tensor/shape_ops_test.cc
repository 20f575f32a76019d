// cat/stack/split/chunk/index_select/gather/scatter_add against naive reference loops over row-major
// doubles: every dtype, negative dims, non-contiguous inputs, empty tensors, dtype promotion in cat, and
// every error path (with self untouched after a failed scatter_add_).
#include <catch2/catch.hpp>

#include "tensor/factory.h"
#include "tensor/ops/shape_ops.h"

namespace braid {
namespace {

Tensor random_tensor(const Shape& shape, DType dt, Generator& g) {
  if (dt == DType::Bool) return randint(0, 2, shape, DType::Int64, &g).to(DType::Bool);
  if (is_floating(dt)) return randn(shape, DType::Float64, &g).to(dt);
  if (dt == DType::UInt8) return randint(0, 100, shape, DType::Int64, &g).to(dt);
  return randint(-50, 50, shape, DType::Int64, &g).to(dt);
}

// Row-major offset of a multi-index.
int64_t offset_of(const Shape& shape, const Shape& idx) {
  int64_t o = 0;
  for (size_t d = 0; d < shape.size(); ++d) o = o * shape[d] + idx[d];
  return o;
}

// Calls f(multi_index) for every position of `shape`, row-major.
template <class F>
void for_each_index(const Shape& shape, F&& f) {
  if (shape_numel(shape) == 0) return;
  Shape idx(shape.size(), 0);
  while (true) {
    f(idx);
    int64_t d = static_cast<int64_t>(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

std::vector<double> values(const Tensor& t) { return to_vector<double>(t); }

}  // namespace

TEST_CASE("shape_ops: cat matches a naive loop for every dtype and dim", "[shape_ops]") {
  Generator g(21);
  for (DType dt : kRealDTypes) {
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      INFO(dtype_name(dt) << " dim " << dim);
      const int64_t d = dim < 0 ? dim + 3 : dim;
      std::vector<Tensor> parts;
      for (int64_t len : {2, 1, 3}) {
        Shape s = {2, 3, 4};
        s[d] = len;
        parts.push_back(random_tensor(s, dt, g));
      }
      parts[1] = parts[1].transpose(0, 2).contiguous().transpose(0, 2);  // a non-contiguous input
      parts[2] = parts[2].select(1, 0).unsqueeze(1).expand(parts[2].shape());  // an expanded one
      const Tensor c = cat(parts, dim);
      Shape want_shape = {2, 3, 4};
      want_shape[d] = 6;
      REQUIRE(c.shape() == want_shape);
      CHECK(c.dtype() == dt);
      const auto got = values(c);
      int64_t start = 0;
      for (const Tensor& p : parts) {
        const auto pv = values(p);
        for_each_index(p.shape(), [&](const Shape& idx) {
          Shape o = idx;
          o[d] += start;
          CHECK(got[offset_of(want_shape, o)] == pv[offset_of(p.shape(), idx)]);
        });
        start += p.size(d);
      }
    }
  }
}

TEST_CASE("shape_ops: cat promotes dtypes and skips 1-D empty tensors", "[shape_ops]") {
  const Tensor i = from_vector<int32_t>({1, 2}, {2});
  const Tensor f = from_vector<float>({0.5f}, {1});
  const Tensor b = from_vector<bool>({true}, {1});
  const Tensor c = cat({i, f, b});
  CHECK(c.dtype() == DType::Float32);
  CHECK(values(c) == std::vector<double>{1, 2, 0.5, 1});
  CHECK(cat({b, i}).dtype() == DType::Int32);
  CHECK(cat({from_vector<int8_t>({1}, {1}), from_vector<uint8_t>({2}, {1})}).dtype() == DType::Int32);
  CHECK(cat({from_vector<double>({1}, {1}), from_vector<Half>({Half(2.0f)}, {1})}).dtype() == DType::Float64);
  // Legacy: [0]-shaped tensors are skipped whatever the others' rank.
  const Tensor m = ones({2, 3});
  const Tensor c2 = cat({zeros({0}), m, zeros({0})}, 1);
  CHECK(c2.shape() == Shape{2, 3});
  CHECK(cat({zeros({0}), zeros({0})}).shape() == Shape{0});
  CHECK(cat({zeros({2, 0}), m}, 1).shape() == Shape{2, 3});
  CHECK(cat({zeros({0, 3}), m, zeros({0, 3})}).shape() == Shape{2, 3});
  CHECK(cat({m}).shares_storage_with(m) == false);
}

TEST_CASE("shape_ops: stack inserts a new dim", "[shape_ops]") {
  Generator g(22);
  for (DType dt : kRealDTypes) {
    INFO(dtype_name(dt));
    const Tensor a = random_tensor({2, 3}, dt, g), b = random_tensor({3, 2}, dt, g).t();
    const auto av = values(a), bv = values(b);
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      const Tensor s = stack({a, b}, dim);
      const int64_t d = dim < 0 ? dim + 3 : dim;
      Shape want = {2, 3};
      want.insert(want.begin() + d, 2);
      REQUIRE(s.shape() == want);
      const auto sv = values(s);
      for_each_index(s.shape(), [&](const Shape& idx) {
        Shape src = idx;
        const int64_t which = idx[d];
        src.erase(src.begin() + d);
        CHECK(sv[offset_of(want, idx)] == (which == 0 ? av : bv)[offset_of({2, 3}, src)]);
      });
    }
  }
  CHECK(stack({scalar_tensor(1.0), scalar_tensor(2.0)}).shape() == Shape{2});
}

TEST_CASE("shape_ops: split and chunk return views", "[shape_ops]") {
  const Tensor a = arange(0, 30, 1, DType::Float32).view({5, 6});
  auto parts = split(a, 2);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].shape() == Shape{2, 6});
  CHECK(parts[2].shape() == Shape{1, 6});
  CHECK(parts[2].shares_storage_with(a));
  CHECK(values(parts[1]) == values(a.narrow(0, 2, 2)));
  parts = split(a, 4, -1);
  REQUIRE(parts.size() == 2);
  CHECK(parts[1].shape() == Shape{5, 2});
  CHECK(values(parts[1]) == values(a.narrow(1, 4, 2)));
  CHECK(split(a, 10).size() == 1);
  parts = split(a, std::vector<int64_t>{1, 0, 5}, 1);
  REQUIRE(parts.size() == 3);
  CHECK(parts[1].shape() == Shape{5, 0});
  CHECK(values(parts[2]) == values(a.narrow(1, 1, 5)));
  // Splitting an empty dim gives one empty piece; split size 0 is allowed only there.
  CHECK(split(zeros({0, 2}), 3).size() == 1);
  CHECK(split(zeros({0, 2}), 0).size() == 1);

  auto ch = chunk(a, 4, 1);  // 6 / 4 -> chunks of 2
  REQUIRE(ch.size() == 3);
  CHECK(ch[0].shape() == Shape{5, 2});
  ch = chunk(a, 2);
  REQUIRE(ch.size() == 2);
  CHECK(ch[0].shape() == Shape{3, 6});
  CHECK(ch[1].shape() == Shape{2, 6});
  CHECK(chunk(a, 10).size() == 5);
  ch = chunk(zeros({0, 3}), 3);
  REQUIRE(ch.size() == 3);
  CHECK(ch[2].shape() == Shape{0, 3});
  // Writes through a piece land in the original.
  split(a, 2)[1].fill_(-1);
  CHECK(a.select(0, 3).select(0, 0).item<float>() == -1.0f);
}

TEST_CASE("shape_ops: index_select matches a naive loop for every dtype", "[shape_ops]") {
  Generator g(23);
  for (DType dt : kRealDTypes) {
    const Tensor a = random_tensor({4, 5, 3}, dt, g).transpose(0, 1);  // [5, 4, 3], non-contiguous
    const auto av = values(a);
    for (int64_t dim : {0, 1, 2, -1}) {
      for (DType idt : {DType::Int64, DType::Int32}) {
        INFO(dtype_name(dt) << " dim " << dim << " index " << dtype_name(idt));
        const int64_t d = dim < 0 ? dim + 3 : dim;
        const Tensor index = from_vector<int64_t>({2, 0, 2, 1}, {4}).to(idt);
        const Tensor r = index_select(a, dim, index);
        Shape want = a.shape();
        want[d] = 4;
        REQUIRE(r.shape() == want);
        CHECK(r.dtype() == dt);
        const auto rv = values(r);
        const std::vector<int64_t> iv = {2, 0, 2, 1};
        for_each_index(want, [&](const Shape& idx) {
          Shape src = idx;
          src[d] = iv[idx[d]];
          CHECK(rv[offset_of(want, idx)] == av[offset_of(a.shape(), src)]);
        });
      }
    }
  }
  const Tensor a = arange(0, 6, 1, DType::Float32).view({2, 3});
  CHECK(index_select(a, 1, zeros({0}, DType::Int64)).shape() == Shape{2, 0});
  CHECK(values(index_select(a, 0, scalar_tensor(1, DType::Int64))) == std::vector<double>{3, 4, 5});
  CHECK(index_select(scalar_tensor(7.0), 0, from_vector<int64_t>({0})).item<double>() == 7.0);
  const Tensor stepped_index = from_vector<int64_t>({1, 9, 0, 9}, {4}).slice(0, 0, 4, 2);
  CHECK(values(index_select(a, 0, stepped_index)) == std::vector<double>{3, 4, 5, 0, 1, 2});
}

TEST_CASE("shape_ops: gather matches a naive loop for every dtype", "[shape_ops]") {
  Generator g(24);
  for (DType dt : kRealDTypes) {
    const Tensor a = random_tensor({4, 5, 3}, dt, g);
    const auto av = values(a);
    for (int64_t dim : {0, 1, 2, -2}) {
      INFO(dtype_name(dt) << " dim " << dim);
      const int64_t d = dim < 0 ? dim + 3 : dim;
      // The index may be smaller than self outside `dim` and longer inside it.
      Shape ishape = {3, 4, 2};
      ishape[d] = 6;
      const Tensor index = randint(0, a.size(d), ishape, DType::Int64, &g);
      const auto iv = to_vector<int64_t>(index);
      for (const Tensor& idx_t : {index, index.to(DType::Int32)}) {
        const Tensor r = gather(a, dim, idx_t);
        REQUIRE(r.shape() == ishape);
        CHECK(r.dtype() == dt);
        const auto rv = values(r);
        for_each_index(ishape, [&](const Shape& idx) {
          Shape src = idx;
          src[d] = iv[offset_of(ishape, idx)];
          CHECK(rv[offset_of(ishape, idx)] == av[offset_of(a.shape(), src)]);
        });
      }
      // Non-contiguous self and index.
      const Tensor at = a.transpose(0, 2).contiguous().transpose(0, 2);
      const Tensor it = index.transpose(0, 1).contiguous().transpose(0, 1);
      CHECK(values(gather(at, dim, it)) == values(gather(a, dim, index)));
      // An expanded self (zero strides) reads the broadcast values.
      const Tensor ae = a.select(0, 1).unsqueeze(0).expand(a.shape());
      const auto aev = values(ae);
      const auto gv = values(gather(ae, dim, index));
      for_each_index(ishape, [&](const Shape& idx) {
        Shape src = idx;
        src[d] = iv[offset_of(ishape, idx)];
        CHECK(gv[offset_of(ishape, idx)] == aev[offset_of(a.shape(), src)]);
      });
    }
  }
  CHECK(gather(scalar_tensor(3.0), 0, scalar_tensor(0, DType::Int64)).item<double>() == 3.0);
  CHECK(gather(ones({2, 3}), 1, zeros({2, 0}, DType::Int64)).shape() == Shape{2, 0});
}

TEST_CASE("shape_ops: scatter_add matches a naive loop for every dtype", "[shape_ops]") {
  Generator g(25);
  for (DType dt : kRealDTypes) {
    for (int64_t dim : {0, 1, -1}) {
      INFO(dtype_name(dt) << " dim " << dim);
      const int64_t d = dim < 0 ? dim + 2 : dim;
      const Tensor self = random_tensor({4, 5}, dt, g);
      const Tensor src = random_tensor({6, 7}, dt, g);
      Shape ishape = {3, 4};
      ishape[d] = 6;  // repeated targets accumulate
      const Tensor index = randint(0, self.size(d), ishape, DType::Int64, &g);
      std::vector<double> want = values(self);
      const auto sv = values(src);
      const auto iv = to_vector<int64_t>(index);
      for_each_index(ishape, [&](const Shape& idx) {
        Shape dst = idx;
        dst[d] = iv[offset_of(ishape, idx)];
        double& w = want[offset_of(self.shape(), dst)];
        w += sv[offset_of(src.shape(), idx)];
      });
      // The reference in the element type: bool adds as "or", narrow integers wrap, 16-bit floats round
      // after every addition, so compare per-dtype.
      const Tensor out = scatter_add(self, dim, index, src);
      CHECK(out.dtype() == dt);
      CHECK(out.shape() == self.shape());
      const auto ov = values(out);
      for (size_t i = 0; i < want.size(); ++i) {
        double w = want[i];
        if (dt == DType::Bool) w = w != 0;
        if (dt == DType::Int8) w = static_cast<int8_t>(static_cast<int64_t>(w));
        if (dt == DType::UInt8) w = static_cast<uint8_t>(static_cast<int64_t>(w));
        const double rtol = dt == DType::Float16 ? 5e-3 : dt == DType::BFloat16 ? 4e-2 : 1e-6;
        CHECK(std::abs(ov[i] - w) <= rtol * (std::abs(w) + 1));
      }
      // In place, through a non-contiguous self.
      const Tensor base = self.t().contiguous();
      const Tensor view = base.t();
      const uint64_t version = view.version();
      CHECK(&scatter_add_(view, dim, index, src) == &view);
      CHECK(view.version() > version);
      CHECK(values(view) == ov);
    }
  }
  const Tensor s = zeros({3});
  scatter_add_(s, 0, zeros({0}, DType::Int64), zeros({0}));
  CHECK(values(s) == std::vector<double>(3, 0.0));
}

TEST_CASE("shape_ops: errors name the op and the offending values", "[shape_ops]") {
  REQUIRE_THROWS_WITH(cat({}), Catch::Contains("torch.cat(): expected a non-empty list of Tensors"));
  REQUIRE_THROWS_WITH(cat({zeros({2, 2}), zeros({3, 3})}, 1),
                      Catch::Contains("Sizes of tensors must match except in dimension 1. Expected size 2 but got "
                                      "size 3 for tensor number 1 in the list."));
  REQUIRE_THROWS_WITH(cat({zeros({2, 2}), zeros({2, 2, 1})}), Catch::Contains("Tensors must have same number of "
                                                                              "dimensions: got 2 and 3"));
  REQUIRE_THROWS_WITH(cat({scalar_tensor(1.0)}), Catch::Contains("zero-dimensional tensor (at position 0) cannot be "
                                                                 "concatenated"));
  REQUIRE_THROWS_WITH(cat({zeros({2})}, 1), Catch::Contains("dimension out of range"));
  REQUIRE_THROWS_WITH(stack({}), Catch::Contains("stack expects a non-empty TensorList"));
  REQUIRE_THROWS_WITH(stack({zeros({2, 3}), zeros({2, 4})}),
                      Catch::Contains("stack expects each tensor to be equal size, but got [2, 3] at entry 0 and "
                                      "[2, 4] at entry 1"));
  REQUIRE_THROWS_WITH(stack({zeros({2})}, 2), Catch::Contains("dimension out of range"));
  REQUIRE_THROWS_WITH(split(zeros({3}), -1), Catch::Contains("split expects split_size be non-negative, but got "
                                                             "split_size=-1"));
  REQUIRE_THROWS_WITH(split(zeros({3}), 0), Catch::Contains("split_size can only be 0 if dimension size is 0"));
  REQUIRE_THROWS_WITH(split(scalar_tensor(1.0), 1), Catch::Contains("split expects at least a 1-dimensional tensor"));
  REQUIRE_THROWS_WITH(split(zeros({3}), std::vector<int64_t>{1, 1}),
                      Catch::Contains("split_with_sizes expects split_sizes to sum exactly to 3 (input tensor's size "
                                      "at dimension 0), but got split_sizes=[1, 1]"));
  REQUIRE_THROWS_WITH(split(zeros({3}), std::vector<int64_t>{-1, 4}),
                      Catch::Contains("split_with_sizes expects split_sizes have only non-negative entries"));
  REQUIRE_THROWS_WITH(chunk(zeros({3}), 0), Catch::Contains("chunk expects `chunks` to be greater than 0, got: 0"));
  REQUIRE_THROWS_WITH(chunk(scalar_tensor(1.0), 2), Catch::Contains("chunk expects at least a 1-dimensional tensor"));

  const Tensor a = zeros({3, 4});
  REQUIRE_THROWS_WITH(index_select(a, 0, from_vector<int64_t>({0, 5})),
                      Catch::Contains("index 5 is out of bounds for dimension 0 with size 3"));
  REQUIRE_THROWS_WITH(index_select(a, 1, from_vector<int64_t>({-1})),
                      Catch::Contains("index -1 is out of bounds for dimension 1 with size 4"));
  REQUIRE_THROWS_WITH(index_select(a, 0, from_vector<float>({0})), Catch::Contains("Expected dtype int64"));
  REQUIRE_THROWS_WITH(index_select(a, 0, zeros({1, 1}, DType::Int64)),
                      Catch::Contains("index_select(): Index is supposed to be a vector"));
  REQUIRE_THROWS_WITH(index_select(a, 2, from_vector<int64_t>({0})), Catch::Contains("dimension out of range"));
  REQUIRE_THROWS_WITH(gather(a, 0, full({2, 4}, 3, DType::Int64)),
                      Catch::Contains("gather(): index 3 is out of bounds for dimension 0 with size 3"));
  REQUIRE_THROWS_WITH(gather(a, 1, zeros({3}, DType::Int64)),
                      Catch::Contains("Index tensor must have the same number of dimensions as input tensor"));
  REQUIRE_THROWS_WITH(gather(a, 1, zeros({4, 1}, DType::Int64)),
                      Catch::Contains("Size does not match at dimension 0 expected index [4, 1] to be smaller than "
                                      "self [3, 4] apart from dimension 1"));
  REQUIRE_THROWS_WITH(gather(a, 0, zeros({1, 1}, DType::UInt8)), Catch::Contains("gather(): Expected dtype int64"));

  const Tensor self = ones({3, 4});
  REQUIRE_THROWS_WITH(scatter_add_(self, 0, from_vector<int64_t>({0, 1, 3, 2}, {1, 4}), ones({1, 4})),
                      Catch::Contains("scatter_add(): index 3 is out of bounds for dimension 0 with size 3"));
  CHECK(values(self) == std::vector<double>(12, 1.0));  // nothing was written
  REQUIRE_THROWS_WITH(scatter_add_(self, 0, zeros({1, 4}, DType::Int64), ones({1, 4}, DType::Float64)),
                      Catch::Contains("scatter_add(): Expected self.dtype to be equal to src.dtype"));
  REQUIRE_THROWS_WITH(scatter_add_(self, 0, zeros({2, 4}, DType::Int64), ones({1, 4})),
                      Catch::Contains("to be smaller size than src"));
  REQUIRE_THROWS_WITH(scatter_add_(self, 1, zeros({4, 1}, DType::Int64), ones({4, 1})),
                      Catch::Contains("Size does not match at dimension 0"));
  REQUIRE_THROWS_WITH(scatter_add(self, 0, zeros({1, 4}), ones({1, 4})), Catch::Contains("Expected dtype int64"));
  REQUIRE_THROWS_WITH(scatter_add_(self, 0, zeros({4}, DType::Int64), ones({4})),
                      Catch::Contains("Index tensor must have the same number of dimensions"));
  REQUIRE_THROWS_WITH(scatter_add_(self, 0, zeros({1, 4}, DType::Int64), ones({4})),
                      Catch::Contains("Index tensor must have the same number of dimensions as src tensor"));
  REQUIRE_THROWS_WITH(index_select(scalar_tensor(1.0), 0, zeros({2}, DType::Int64)),
                      Catch::Contains("Index to scalar can have only 1 value, got 2 value(s)"));
  REQUIRE_THROWS_WITH(cat({zeros({2}), Tensor()}), Catch::Contains("tensor number 1 in the list is undefined"));
  REQUIRE_THROWS_WITH(stack({zeros({2}), Tensor()}), Catch::Contains("tensor number 1 in the list is undefined"));
}

}  // namespace braid
