// Tensor views: shared storage, geometry, version counters, and the error messages of view, expand,
// narrow, select and permute.
#include <catch2/catch.hpp>

#include "tensor/factory.h"
#include "tensor/tensor.h"

namespace braid {
namespace {

// 0, 1, 2, ... as float32 with the given shape.
Tensor iota(const Shape& shape) { return arange(0, shape_numel(shape), 1, DType::Float32).view(shape); }

std::vector<float> vals(const Tensor& t) { return to_vector<float>(t); }

}  // namespace

TEST_CASE("views: every view shares storage and writes through to the base", "[core][views]") {
  const Tensor base = iota({2, 3, 4});
  struct Case {
    const char* name;
    Tensor v;
  };
  const std::vector<Case> cases = {
      {"view", base.view({6, 4})},
      {"view -1", base.view({-1})},
      {"reshape", base.reshape({4, 6})},
      {"narrow", base.narrow(2, 1, 2)},
      {"slice step", base.slice(2, 0, 4, 2)},
      {"select", base.select(1, 2)},
      {"transpose", base.transpose(0, 2)},
      {"permute", base.permute({2, 0, 1})},
      {"expand", base.select(0, 0).select(0, 0).unsqueeze(0).expand({5, 4})},
      {"flatten", base.flatten(1)},
      {"unsqueeze", base.unsqueeze(1)},
      {"squeeze", base.unsqueeze(0).squeeze()},
      {"squeeze dim", base.unsqueeze(3).squeeze(3)},
      {"t", base.select(0, 1).t()},
      {"as_strided", base.as_strided({2, 2}, {5, 1}, 3)},
      {"alias", base.alias()},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    CHECK(c.v.shares_storage_with(base));
    CHECK_FALSE(c.v.is_same(base));
  }
  // Writes through views land in the base.
  base.narrow(2, 1, 2).select(0, 1).fill_(-1);
  CHECK(vals(base.select(0, 1)) ==
        std::vector<float>{12, -1, -1, 15, 16, -1, -1, 19, 20, -1, -1, 23});
  base.slice(2, 0, 4, 3).select(0, 0).fill_(100);  // columns 0 and 3 of the first matrix
  CHECK(vals(base.select(0, 0)) == std::vector<float>{100, 1, 2, 100, 100, 5, 6, 100, 100, 9, 10, 100});
  base.transpose(0, 2).select(0, 1).copy_(zeros({3, 2}));  // base[:, :, 1] = 0
  CHECK(vals(base.select(2, 1)) == std::vector<float>(6, 0.0f));
  // And writes to the base are visible in views.
  const Tensor p = base.permute({2, 0, 1});
  base.fill_(7);
  CHECK(vals(p) == std::vector<float>(24, 7.0f));
}

TEST_CASE("views: geometry of each view", "[core][views]") {
  const Tensor base = iota({2, 3, 4});
  CHECK(base.strides() == Shape{12, 4, 1});
  CHECK(base.is_contiguous());
  const Tensor tr = base.transpose(0, 2);
  CHECK(tr.shape() == Shape{4, 3, 2});
  CHECK(tr.strides() == Shape{1, 4, 12});
  CHECK_FALSE(tr.is_contiguous());
  CHECK(vals(tr.select(0, 1)) == std::vector<float>{1, 13, 5, 17, 9, 21});
  const Tensor sl = base.slice(2, 1, 4, 2);
  CHECK(sl.shape() == Shape{2, 3, 2});
  CHECK(sl.strides() == Shape{12, 4, 2});
  CHECK(sl.storage_offset() == 1);
  CHECK(vals(sl.select(0, 0)) == std::vector<float>{1, 3, 5, 7, 9, 11});
  CHECK(base.slice(2, -3, 100).shape() == Shape{2, 3, 3});  // clamps like Python
  CHECK(base.slice(2, 3, 1).shape() == Shape{2, 3, 0});
  CHECK(base.slice(1, 0, 3, 5).shape() == Shape{2, 1, 4});
  const Tensor n = base.narrow(1, -2, 2);
  CHECK(n.storage_offset() == 4);
  CHECK(vals(n.select(0, 0)) == std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(base.select(1, -1).storage_offset() == 8);
  const Tensor pm = base.permute({1, 2, 0});
  CHECK(pm.shape() == Shape{3, 4, 2});
  CHECK(pm.strides() == Shape{4, 1, 12});
  CHECK(base.permute({-1, 0, 1}).shape() == Shape{4, 2, 3});
  const Tensor ex = base.select(2, 0).unsqueeze(0).expand({5, -1, 3});
  CHECK(ex.shape() == Shape{5, 2, 3});
  CHECK(ex.strides() == Shape{0, 12, 4});
  CHECK(base.select(0, 0).expand({7, 3, 4}).strides() == Shape{0, 4, 1});
  CHECK(base.unsqueeze(-1).shape() == Shape{2, 3, 4, 1});
  CHECK(base.unsqueeze(0).strides()[0] == 24);
  CHECK(base.unsqueeze(0).squeeze(0).shape() == base.shape());
  CHECK(base.squeeze(1).shape() == base.shape());  // size 3: unchanged
  CHECK(iota({1, 3, 1}).squeeze().shape() == Shape{3});
  CHECK(base.flatten().shape() == Shape{24});
  CHECK(base.flatten(0, 1).shape() == Shape{6, 4});
  CHECK(scalar_tensor(3).flatten().shape() == Shape{1});
  CHECK(scalar_tensor(3).t().dim() == 0);
  CHECK(iota({4}).t().shape() == Shape{4});
  CHECK(base.view({2, -1, 2}).shape() == Shape{2, 6, 2});
  // view of a non-contiguous tensor where the merged dims are contiguous among themselves.
  const Tensor nc = iota({4, 6}).narrow(1, 0, 4).view({4, 2, 2});
  CHECK(nc.strides() == Shape{6, 2, 1});
  CHECK(vals(nc.select(0, 1)) == std::vector<float>{6, 7, 8, 9});
  // Size-0 and 0-dim views.
  CHECK(iota({0, 3}).view({3, 0}).shape() == Shape{3, 0});
  CHECK(scalar_tensor(1.5).view({1, 1}).shape() == Shape{1, 1});
  CHECK(iota({1}).view({}).dim() == 0);
}

TEST_CASE("views: the version counter is shared by all views and bumped by in-place writes", "[core][views]") {
  const Tensor base = zeros({3, 4});
  const Tensor v = base.transpose(0, 1);
  const Tensor other = zeros({3, 4});
  const uint64_t v0 = base.version();
  const uint64_t o0 = other.version();
  CHECK(v.version() == v0);
  v.fill_(1);
  CHECK(base.version() == v0 + 1);
  CHECK(v.version() == v0 + 1);
  base.narrow(0, 0, 1).copy_(other.narrow(0, 0, 1));
  CHECK(v.version() == v0 + 2);
  CHECK(other.version() == o0);  // a copy source is not bumped
  base.zero_();
  CHECK(v.version() == v0 + 3);
  const Tensor c = base.clone();
  CHECK(c.version() == 1);  // a fresh storage (clone's own copy_ counts once)
  CHECK(base.version() == v0 + 3);
}

TEST_CASE("views: view() needs compatible strides and says to use reshape", "[core][views]") {
  const Tensor tr = iota({3, 4}).t();
  CHECK_THROWS_WITH(tr.view({12}), Catch::Contains("view size is not compatible with input tensor's size and stride") &&
                                       Catch::Contains("Use .reshape(...) instead."));
  CHECK_THROWS_WITH(iota({4, 6}).narrow(1, 0, 4).view({16}), Catch::Contains("Use .reshape"));
  CHECK_THROWS_WITH(iota({2, 3}).view({4, 2}), Catch::Contains("shape '[4, 2]' is invalid for input of size 6"));
  CHECK_THROWS_WITH(iota({2, 3}).view({-1, -1}), Catch::Contains("only one dimension can be inferred"));
  CHECK_THROWS_WITH(iota({2, 3}).view({-1, 4}), Catch::Contains("is invalid for input of size 6"));
  CHECK_THROWS_WITH(iota({2, 3}).view({-2, 3}), Catch::Contains("invalid shape dimension -2"));
  CHECK_THROWS_WITH(iota({0, 3}).view({-1, 0}), Catch::Contains("is invalid for input of size 0"));
}

TEST_CASE("views: reshape is a view when possible and copies otherwise", "[core][views]") {
  const Tensor base = iota({3, 4});
  const Tensor r = base.reshape({2, 6});
  CHECK(r.shares_storage_with(base));
  const Tensor tr = base.t();
  const Tensor rc = tr.reshape({12});
  CHECK_FALSE(rc.shares_storage_with(base));
  CHECK(rc.is_contiguous());
  CHECK(vals(rc) == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  base.fill_(0);
  CHECK(vals(rc)[1] == 4);  // the copy is independent
  CHECK(tr.reshape({4, 3}).shares_storage_with(base));  // same shape: still a view
  // An expanded tensor: [4, 6] keeps the broadcast dim as a view, [8, 3] has to copy.
  const Tensor e = iota({2, 3});
  const Tensor e46 = e.expand({4, 2, 3}).reshape({4, 6});
  CHECK(e46.shares_storage_with(e));
  CHECK(e46.strides() == Shape{0, 1});
  const Tensor e83 = e.expand({4, 2, 3}).reshape({8, 3});
  CHECK_FALSE(e83.shares_storage_with(e));
  CHECK(vals(e83.narrow(0, 2, 2)) == std::vector<float>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("views: expand errors", "[core][views]") {
  const Tensor t = iota({3, 1});
  CHECK_THROWS_WITH(t.expand({3, 4, 5}),
                    Catch::Contains("The expanded size of the tensor (4) must match the existing size (3) at "
                                    "non-singleton dimension 1.  Target sizes: [3, 4, 5].  Tensor sizes: [3, 1]"));
  CHECK_THROWS_WITH(t.expand({4}), Catch::Contains("the number of sizes provided (1) must be greater or equal to "
                                                   "the number of dimensions in the tensor (2)"));
  CHECK_THROWS_WITH(t.expand({-1, 3, 2}), Catch::Contains("expanded size -1 is not allowed in a leading, non-existing "
                                                          "dimension 0"));
  CHECK(t.expand({2, 3, 4}).shape() == Shape{2, 3, 4});
  CHECK(t.expand({3, 0}).numel() == 0);
  CHECK(t.expand_as(iota({3, 2})).strides() == Shape{1, 0});
}

TEST_CASE("views: narrow, select, slice, permute, flatten, t errors", "[core][views]") {
  const Tensor t = iota({3, 4});
  CHECK_THROWS_WITH(t.narrow(1, 3, 2), Catch::Contains("narrow: start (3) + length (2) exceeds dimension size (4)."));
  CHECK_THROWS_WITH(t.narrow(1, 5, 0), Catch::Contains("narrow: start (5) out of range for dimension 1 of size 4"));
  CHECK_THROWS_WITH(t.narrow(0, 0, -1), Catch::Contains("length must be non-negative"));
  CHECK_THROWS_WITH(t.narrow(2, 0, 1), Catch::Contains("narrow: dimension out of range"));
  CHECK_THROWS_WITH(scalar_tensor(1).narrow(0, 0, 1), Catch::Contains("cannot be applied to a 0-dim tensor"));
  CHECK(t.narrow(1, 4, 0).shape() == Shape{3, 0});
  CHECK_THROWS_WITH(t.select(0, 3),
                    Catch::Contains("select(): index 3 out of range for tensor of size [3, 4] at dimension 0"));
  CHECK_THROWS_WITH(t.select(1, -5), Catch::Contains("index -5 out of range"));
  CHECK_THROWS_WITH(scalar_tensor(1).select(0, 0), Catch::Contains("select() cannot be applied to a 0-dim tensor"));
  CHECK_THROWS_WITH(t.slice(0, 0, 3, 0), Catch::Contains("step must be positive"));
  CHECK_THROWS_WITH(t.permute({0}), Catch::Contains("input.dim() = 2 is not equal to len(dims) = 1"));
  CHECK_THROWS_WITH(t.permute({1, 1}), Catch::Contains("permute: repeated dim 1"));
  CHECK_THROWS_WITH(t.permute({0, 2}), Catch::Contains("permute: dimension out of range"));
  CHECK_THROWS_WITH(iota({2, 3, 4}).flatten(2, 1), Catch::Contains("start_dim (2) cannot come after end_dim (1)"));
  CHECK_THROWS_WITH(iota({2, 3, 4}).t(), Catch::Contains("t() expects a tensor with <= 2 dimensions, but self is 3D"));
  CHECK_THROWS_WITH(t.unsqueeze(3), Catch::Contains("unsqueeze: dimension out of range"));
  CHECK(t.unsqueeze(-3).shape() == Shape{1, 3, 4});
}

TEST_CASE("views: as_strided and from_storage bounds", "[core][views]") {
  const Tensor t = iota({6});
  CHECK(vals(t.as_strided({2, 2}, {3, 1}, 1)) == std::vector<float>{1, 2, 4, 5});
  CHECK_THROWS_WITH(t.as_strided({2, 2}, {3, 1}, 3), Catch::Contains("needs 32 bytes but the storage has 24"));
  CHECK_THROWS_WITH(t.as_strided({2}, {-1}, 3), Catch::Contains("negative stride"));
  CHECK_THROWS_WITH(t.as_strided({2}, {1, 1}, 0), Catch::Contains("differ in length"));
  CHECK_THROWS_WITH(t.as_strided({2}, {1}, -1), Catch::Contains("negative storage offset"));
  CHECK(t.as_strided({0, 100}, {100, 1}, 6).numel() == 0);  // an empty view needs no bytes
}

}  // namespace braid
