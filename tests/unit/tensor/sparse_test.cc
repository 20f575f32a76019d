// Sparse COO tensors: validation, coalesce (with duplicates, hybrid values, dtype kept), to_dense, add,
// add_to_dense, mul, from_dense.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "tensor/cuda/device_api.h"
#include "tensor/factory.h"
#include "tensor/sparse.h"

namespace braid {
namespace {

Tensor idx(const std::vector<int64_t>& v, int64_t sparse_dim) {
  const auto nnz = static_cast<int64_t>(v.size()) / std::max<int64_t>(sparse_dim, 1);
  return from_vector<int64_t>(v, {sparse_dim, sparse_dim == 0 ? 0 : nnz});
}

std::vector<double> dense_values(const Tensor& t) { return to_vector<double>(t); }

}  // namespace

TEST_CASE("sparse: coalesce sorts by index and sums duplicates", "[sparse]") {
  const SparseTensor s(idx({1, 0, 1, 2, 0, /**/ 2, 1, 2, 0, 1}, 2), from_vector<float>({1, 2, 3, 4, 5}), {3, 3});
  CHECK(s.sparse_dim() == 2);
  CHECK(s.dense_dim() == 0);
  CHECK(s.nnz() == 5);
  CHECK_FALSE(s.is_coalesced());
  const SparseTensor c = s.coalesce();
  CHECK(c.is_coalesced());
  CHECK(c.nnz() == 3);
  CHECK(c.dtype() == DType::Float32);
  CHECK(c.shape() == Shape{3, 3});
  CHECK(to_vector<int64_t>(c.indices()) == std::vector<int64_t>{0, 1, 2, /**/ 1, 2, 0});
  CHECK(to_vector<float>(c.values()) == std::vector<float>{7, 4, 4});
  // The input is unchanged, and coalescing a coalesced tensor changes nothing.
  CHECK(s.nnz() == 5);
  CHECK(to_vector<float>(c.coalesce().values()) == std::vector<float>{7, 4, 4});
  CHECK(dense_values(s.to_dense()) == std::vector<double>{0, 7, 0, 0, 0, 4, 4, 0, 0});
}

TEST_CASE("sparse: hybrid tensors carry dense trailing dims", "[sparse]") {
  const SparseTensor s(idx({2, 0, 2}, 1), from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}), {4, 2});
  CHECK(s.sparse_dim() == 1);
  CHECK(s.dense_dim() == 1);
  const SparseTensor c = s.coalesce();
  CHECK(to_vector<int64_t>(c.indices()) == std::vector<int64_t>{0, 2});
  CHECK(c.values().shape() == Shape{2, 2});
  CHECK(to_vector<float>(c.values()) == std::vector<float>{3, 4, 6, 8});
  const Tensor d = s.to_dense();
  CHECK(d.shape() == Shape{4, 2});
  CHECK(dense_values(d) == std::vector<double>{3, 4, 0, 0, 6, 8, 0, 0});

  // Two sparse dims and two dense dims.
  const Tensor hv = from_vector<int32_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 2, 2});
  const SparseTensor h(idx({0, 1, 0, /**/ 1, 0, 1}, 2), hv, {2, 2, 2, 2});
  std::vector<double> expected(16, 0.0);
  for (int j = 0; j < 4; ++j) {
    expected[(0 * 2 + 1) * 4 + j] = (1 + j) + (9 + j);
    expected[(1 * 2 + 0) * 4 + j] = 5 + j;
  }
  const Tensor hd = h.to_dense();
  CHECK(hd.dtype() == DType::Int32);
  CHECK(dense_values(hd) == expected);
}

TEST_CASE("sparse: coalesce keeps the dtype and sums 16-bit floats in float", "[sparse]") {
  const Tensor three = idx({4, 4, 4}, 1);
  // In half, 2048 + 1 rounds back to 2048 at every step; summing in float gives 2050 exactly.
  const SparseTensor h(three, from_vector<Half>({Half(2048.f), Half(1.f), Half(1.f)}), {5});
  const SparseTensor hc = h.coalesce();
  CHECK(hc.dtype() == DType::Float16);
  CHECK(static_cast<float>(to_vector<Half>(hc.values())[0]) == 2050.f);
  const SparseTensor b(three, from_vector<BFloat16>({BFloat16(256.f), BFloat16(1.f), BFloat16(1.f)}), {5});
  CHECK(static_cast<float>(to_vector<BFloat16>(b.coalesce().values())[0]) == 258.f);
  CHECK(b.coalesce().dtype() == DType::BFloat16);
  // Integers wrap like PyTorch's integer addition; bool sums as "or".
  const SparseTensor i8(three, from_vector<int8_t>({100, 100, -50}), {5});
  CHECK(i8.coalesce().dtype() == DType::Int8);
  CHECK(to_vector<int8_t>(i8.coalesce().values()) == std::vector<int8_t>{static_cast<int8_t>(150)});
  const SparseTensor bl(three, from_vector<bool>({true, false, true}), {5});
  CHECK(bl.coalesce().dtype() == DType::Bool);
  CHECK(to_vector<bool>(bl.coalesce().values()) == std::vector<bool>{true});
  const SparseTensor big(three, from_vector<int64_t>({INT64_MAX, 1, 0}), {5});
  CHECK(to_vector<int64_t>(big.coalesce().values()) == std::vector<int64_t>{INT64_MIN});
}

TEST_CASE("sparse: to_dense matches a reference over random tensors with duplicates", "[sparse]") {
  std::mt19937_64 rng(7);
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64, DType::Int32, DType::Float16}) {
    for (int rep = 0; rep < 20; ++rep) {
      const int64_t sd = static_cast<int64_t>(rng() % 3) + 1;
      const int64_t dd = static_cast<int64_t>(rng() % 2);
      Shape size;
      for (int64_t d = 0; d < sd + dd; ++d) size.push_back(static_cast<int64_t>(rng() % 3) + 1);
      const int64_t nnz = static_cast<int64_t>(rng() % 10);
      std::vector<int64_t> iv(static_cast<size_t>(sd * nnz));
      for (int64_t d = 0; d < sd; ++d) {
        for (int64_t k = 0; k < nnz; ++k) iv[d * nnz + k] = static_cast<int64_t>(rng() % size[d]);
      }
      const int64_t row = dd ? size.back() : 1;
      std::vector<double> vv(static_cast<size_t>(nnz * row));
      for (auto& v : vv) v = static_cast<double>(static_cast<int>(rng() % 21) - 10);
      Shape vshape = {nnz};
      if (dd) vshape.push_back(row);
      const SparseTensor s(from_vector<int64_t>(iv, {sd, nnz}), from_vector<double>(vv, vshape).to(dtype), size);
      std::vector<double> expected(static_cast<size_t>(shape_numel(size)), 0.0);
      const Shape strides = contiguous_strides(size);
      for (int64_t k = 0; k < nnz; ++k) {
        int64_t off = 0;
        for (int64_t d = 0; d < sd; ++d) off += iv[d * nnz + k] * strides[d];
        for (int64_t j = 0; j < row; ++j) expected[off + j] += vv[k * row + j];
      }
      INFO(dtype_name(dtype) << " size " << shape_str(size) << " nnz " << nnz);
      const Tensor d = s.to_dense();
      CHECK(d.dtype() == dtype);
      CHECK(d.shape() == size);
      CHECK(dense_values(d) == expected);
      CHECK(dense_values(s.coalesce().to_dense()) == expected);
      // from_dense of the dense form gives back the same dense tensor.
      CHECK(dense_values(SparseTensor::from_dense(d).to_dense()) == expected);
    }
  }
}

TEST_CASE("sparse: add is coalesced, promotes dtypes and matches the dense sum", "[sparse]") {
  const SparseTensor a(idx({0, 2, 0, /**/ 1, 1, 1}, 2), from_vector<int32_t>({1, 2, 3}), {3, 2});
  const SparseTensor b(idx({2, 1, /**/ 1, 0}, 2), from_vector<float>({0.5f, -4.f}), {3, 2});
  const SparseTensor sum = a.add(b);
  CHECK(sum.is_coalesced());
  CHECK(sum.dtype() == DType::Float32);
  CHECK(sum.nnz() == 3);
  CHECK(to_vector<int64_t>(sum.indices()) == std::vector<int64_t>{0, 1, 2, /**/ 1, 0, 1});
  CHECK(to_vector<float>(sum.values()) == std::vector<float>{4, -4, 2.5f});
  CHECK(dense_values(sum.to_dense()) == std::vector<double>{0, 4, -4, 0, 0, 2.5});
  CHECK(a.add(a).dtype() == DType::Int32);
  CHECK(dense_values(a.add(a).to_dense()) == std::vector<double>{0, 8, 0, 0, 0, 4});
  // An empty operand.
  const SparseTensor none(idx({}, 2), from_vector<float>({}, {0}), {3, 2});
  CHECK(none.nnz() == 0);
  CHECK(dense_values(none.to_dense()) == std::vector<double>(6, 0.0));
  CHECK(dense_values(a.add(none).to_dense()) == std::vector<double>{0, 4, 0, 0, 0, 2});
  CHECK(none.add(none).nnz() == 0);
  // Half + half stays half.
  const SparseTensor h(idx({0}, 1), from_vector<Half>({Half(1.5f)}, {1}), {2});
  CHECK(h.add(h).dtype() == DType::Float16);
  CHECK(to_vector<float>(h.add(h).values()) == std::vector<float>{3.f});
}

TEST_CASE("sparse: add errors name the shapes", "[sparse]") {
  const SparseTensor a(idx({0, 1}, 1), from_vector<float>({1, 2}), {3});
  const SparseTensor b(idx({0}, 1), from_vector<float>({1}, {1}), {4});
  CHECK_THROWS_WITH(a.add(b), Catch::Contains("different shapes [3] and [4]"));
  const SparseTensor hyb(idx({0}, 1), from_vector<float>({1, 2}, {1, 2}), {3, 2});
  const SparseTensor full(idx({0, 1}, 2), from_vector<float>({1}, {1}), {3, 2});
  CHECK_THROWS_WITH(hyb.add(full), Catch::Contains("different sparse_dim (1 and 2)"));
  CHECK_THROWS_AS(SparseTensor().add(a), InvalidArgument);
}

TEST_CASE("sparse: add_to_dense", "[sparse]") {
  const SparseTensor s(idx({1, 0, 1}, 1), from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}), {2, 2});
  const Tensor dense = from_vector<double>({10, 20, 30, 40}, {2, 2});
  const Tensor out = s.add_to_dense(dense);
  CHECK(out.dtype() == DType::Float64);
  CHECK(dense_values(out) == std::vector<double>{13, 24, 36, 48});
  CHECK(dense_values(dense) == std::vector<double>{10, 20, 30, 40});  // a new tensor
  CHECK_FALSE(out.shares_storage_with(dense));
  // A non-contiguous dense operand and an integer sparse tensor.
  const SparseTensor si(idx({0, 1, /**/ 1, 0}, 2), from_vector<int64_t>({5, 7}), {2, 2});
  const Tensor dt = from_vector<int64_t>({1, 2, 3, 4}, {2, 2}).t();
  const Tensor oi = si.add_to_dense(dt);
  CHECK(oi.dtype() == DType::Int64);
  CHECK(to_vector<int64_t>(oi) == std::vector<int64_t>{1, 3 + 5, 2 + 7, 4});
  CHECK_THROWS_WITH(s.add_to_dense(from_vector<float>({1, 2, 3})),
                    Catch::Contains("does not match the sparse shape [2, 2]"));
}

TEST_CASE("sparse: mul by a scalar", "[sparse]") {
  const SparseTensor f(idx({2, 0}, 1), from_vector<float>({1.5f, -2.f}), {3});
  const SparseTensor f2 = f.mul(2);
  CHECK(f2.dtype() == DType::Float32);
  CHECK(to_vector<float>(f2.values()) == std::vector<float>{3.f, -4.f});
  CHECK(to_vector<int64_t>(f2.indices()) == std::vector<int64_t>{2, 0});
  CHECK_FALSE(f2.is_coalesced());
  CHECK(f.coalesce().mul(2).is_coalesced());
  const SparseTensor i(idx({0, 1}, 1), from_vector<int32_t>({3, -5}), {2});
  CHECK(i.mul(3).dtype() == DType::Int32);
  CHECK(to_vector<int32_t>(i.mul(3).values()) == std::vector<int32_t>{9, -15});
  CHECK(i.mul(0.5).dtype() == DType::Float32);  // a float scalar with integer values gives float32
  CHECK(to_vector<float>(i.mul(0.5).values()) == std::vector<float>{1.5f, -2.5f});
  const SparseTensor b(idx({0, 1}, 1), from_vector<bool>({true, true}), {2});
  CHECK(b.mul(false).dtype() == DType::Bool);
  CHECK(to_vector<bool>(b.mul(false).values()) == std::vector<bool>{false, false});
  CHECK(b.mul(3).dtype() == DType::Int64);
  CHECK(to_vector<int64_t>(b.mul(3).values()) == std::vector<int64_t>{3, 3});
}

TEST_CASE("sparse: from_dense drops zeros and keeps NaN", "[sparse]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor d = from_vector<float>({0, 1, 0, -0.0f, nan, 2}, {2, 3});
  const SparseTensor s = SparseTensor::from_dense(d);
  CHECK(s.is_coalesced());
  CHECK(s.sparse_dim() == 2);
  CHECK(s.dense_dim() == 0);
  CHECK(s.nnz() == 3);
  CHECK(to_vector<int64_t>(s.indices()) == std::vector<int64_t>{0, 1, 1, /**/ 1, 1, 2});
  const auto v = to_vector<float>(s.values());
  CHECK(v[0] == 1.f);
  CHECK(std::isnan(v[1]));
  CHECK(v[2] == 2.f);
  // Non-contiguous input, a 0-dim input and an all-zero input.
  const SparseTensor t = SparseTensor::from_dense(d.t());
  CHECK(t.shape() == Shape{3, 2});
  CHECK(to_vector<int64_t>(t.indices()) == std::vector<int64_t>{1, 1, 2, /**/ 0, 1, 1});
  const SparseTensor z = SparseTensor::from_dense(scalar_tensor(5, DType::Int32));
  CHECK(z.sparse_dim() == 0);
  CHECK(z.nnz() == 1);
  CHECK(z.to_dense().dim() == 0);
  CHECK(z.to_dense().item<int>() == 5);
  CHECK(SparseTensor::from_dense(zeros({4, 4})).nnz() == 0);
  CHECK(SparseTensor::from_dense(zeros({0, 4})).nnz() == 0);
}

TEST_CASE("sparse: the constructor validates and names what is wrong", "[sparse]") {
  const Tensor v = from_vector<float>({1, 2});
  CHECK_THROWS_WITH(SparseTensor(from_vector<int32_t>({0, 1}, {1, 2}), v, {3}),
                    Catch::Contains("indices must be int64"));
  CHECK_THROWS_WITH(SparseTensor(from_vector<int64_t>({0, 1}), v, {3}), Catch::Contains("indices must be 2-D"));
  CHECK_THROWS_WITH(SparseTensor(idx({0, 1}, 1), scalar_tensor(1.0), {3}), Catch::Contains("at least 1 dimension"));
  CHECK_THROWS_WITH(SparseTensor(idx({0, 1, 2}, 1), v, {3}),
                    Catch::Contains("nnz = 3") && Catch::Contains("2 entries"));
  CHECK_THROWS_WITH(SparseTensor(idx({0, 1}, 1), v, {3, 3}),
                    Catch::Contains("sparse_dim (1) + dense_dim (0) must equal") && Catch::Contains("[3, 3]"));
  CHECK_THROWS_WITH(SparseTensor(idx({0, 3}, 1), v, {3}),
                    Catch::Contains("index 3 of entry 1 is out of bounds for dimension 0 of size 3"));
  CHECK_THROWS_WITH(SparseTensor(idx({-1, 0}, 1), v, {3}), Catch::Contains("index -1 of entry 0 is out of bounds"));
  CHECK_THROWS_WITH(SparseTensor(idx({0, 1}, 1), from_vector<float>({1, 2, 3, 4}, {2, 2}), {3, 3}),
                    Catch::Contains("dense sizes [2]") && Catch::Contains("has [3]"));
  CHECK_THROWS_WITH(SparseTensor(idx({0, 1}, 1), v, {-3}), Catch::Contains("negative dimension"));
  CHECK_THROWS_WITH(SparseTensor(idx({1, 0}, 1), v, {3}, true), Catch::Contains("not in strictly increasing"));
  CHECK_THROWS_WITH(SparseTensor(idx({1, 1}, 1), v, {3}, true), Catch::Contains("not in strictly increasing"));
  CHECK_NOTHROW(SparseTensor(idx({0, 2}, 1), v, {3}, true));
  CHECK_THROWS_WITH(SparseTensor(Tensor(), v, {3}), Catch::Contains("indices are undefined"));
}

TEST_CASE("sparse: describe", "[sparse]") {
  const SparseTensor s(idx({0, 1}, 1), from_vector<float>({1, 2, 3, 4}, {2, 2}), {3, 2});
  CHECK(s.describe() == "sparse float32[3, 2] cpu (sparse_dim 1, dense_dim 1, nnz 2)");
  CHECK(s.coalesce().describe() == "sparse float32[3, 2] cpu (sparse_dim 1, dense_dim 1, nnz 2, coalesced)");
  CHECK(SparseTensor().describe() == "undefined sparse tensor");
  CHECK_FALSE(SparseTensor().defined());
}

TEST_CASE("sparse: CUDA values stay on their device", "[sparse][cuda]") {
  if (cuda::device_count() == 0) {
    WARN("skipped: no CUDA device (" << cuda::unavailable_reason() << ")");
    return;
  }
  const SparseTensor s(idx({1, 0, 1}, 1).cuda(), from_vector<float>({1, 2, 3}).cuda(), {2});
  const SparseTensor c = s.coalesce();
  CHECK(c.values().is_cuda());
  CHECK(c.indices().is_cuda());
  CHECK(to_vector<float>(c.values()) == std::vector<float>{2, 4});
  const Tensor d = s.to_dense();
  CHECK(d.is_cuda());
  CHECK(to_vector<float>(d) == std::vector<float>{2, 4});
  CHECK(to_vector<float>(s.add(s).values()) == std::vector<float>{4, 8});
  CHECK(to_vector<float>(s.add_to_dense(ones({2}).cuda())) == std::vector<float>{3, 5});
  CHECK(s.mul(2).values().is_cuda());
  CHECK(SparseTensor::from_dense(d).values().is_cuda());
}

}  // namespace braid
