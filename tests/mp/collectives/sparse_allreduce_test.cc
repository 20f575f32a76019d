// Sparse allreduce of COO tensors (torch's simple_sparse_reduce_tests): the upstream generator with 1-3
// sparse dimensions and 1-3 dense dimensions, one or two inputs per rank; every output (the inputs,
// updated in place, and the future's value) coalesces to N - k at index k. Also ranks without entries.
#include "tensor/sparse.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;

namespace {

// Upstream's generate(k, N, sparse_dims, dense_dims): indices 0..k along the first dimension (0 along the
// other sparse ones), ones as values with dense dims of size 2, shape [N] + [2]*dense + [N]*(sparse-1).
Tensor generate(int64_t k, int64_t n, int sparse_dims, int dense_dims) {
  Tensor indices = zeros({sparse_dims, k + 1}, DType::Int64);
  indices.select(0, 0).copy_(arange(0, k + 1, 1, DType::Int64));
  Shape shape{n};
  Shape vshape{k + 1};
  for (int d = 0; d < dense_dims; ++d) {
    shape.push_back(2);
    vshape.push_back(2);
  }
  for (int s = 1; s < sparse_dims; ++s) shape.push_back(n);
  return SparseTensor(indices, ones(vshape), shape).to_tensor();
}

// Σ_{k<N} generate(k, N) in dense form: N - j at [j, 0, ...] along the sparse dims, in every dense entry.
Tensor expected_dense(int64_t n, int sparse_dims, int dense_dims) {
  Shape shape{n};
  for (int d = 0; d < dense_dims; ++d) shape.push_back(2);
  for (int s = 1; s < sparse_dims; ++s) shape.push_back(n);
  Tensor out = zeros(shape);
  for (int64_t j = 0; j < n; ++j) {
    Tensor row = out.select(0, j);
    for (int s = 1; s < sparse_dims; ++s) row = row.select(0, 0);
    row.fill_(static_cast<double>(n - j));
  }
  return out;
}

void check_sparse_result(const Tensor& got, const Tensor& want) {
  REQUIRE(got.is_sparse());
  CHECK(got.sparse().shape() == want.shape());
  CHECK_THAT(got.sparse().coalesce().to_dense(), Equals(want));
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "sparse allreduce: upstream generator cases, one and two inputs per rank", "[sparse][allreduce]") {
  if (!supports_sparse()) return;
  auto pg = shared_group();
  const struct {
    int sparse_dims, dense_dims;
  } kinds[] = {{1, 0}, {2, 0}, {3, 0}, {1, 1}, {1, 2}, {1, 3}};
  for (int per_rank : {1, 2}) {
    const int64_t n = int64_t{per_rank} * size();
    for (const auto& kind : kinds) {
      INFO(per_rank << " input(s) per rank, " << kind.sparse_dims << " sparse and " << kind.dense_dims << " dense dims");
      TensorList xs;
      for (int i = 0; i < per_rank; ++i) xs.push_back(generate(int64_t{per_rank} * rank() + i, n, kind.sparse_dims, kind.dense_dims));
      const TensorList value = finish(pg->allreduce(xs));
      const Tensor want = expected_dense(n, kind.sparse_dims, kind.dense_dims);
      for (const Tensor& t : xs) check_sparse_result(t, want);
      REQUIRE(value.size() == xs.size());
      for (const Tensor& t : value) check_sparse_result(t, want);
    }
  }
}

TEST_CASE_METHOD(MpFixture, "sparse allreduce: ranks without entries and float64 values", "[sparse][allreduce]") {
  if (!supports_sparse()) return;
  auto pg = shared_group();
  const int ws = size();
  // Odd ranks contribute nothing; even rank r contributes 1.5 at index r of a length-ws vector.
  Tensor indices = rank() % 2 == 0 ? ints({rank()}).view({1, 1}) : zeros({1, 0}, DType::Int64);
  Tensor values = rank() % 2 == 0 ? floats({1.5}, DType::Float64) : zeros({0}, DType::Float64);
  TensorList xs{SparseTensor(indices, values, {ws}).to_tensor()};
  finish(pg->allreduce(xs));
  std::vector<double> want(static_cast<size_t>(ws), 0.0);
  for (int r = 0; r < ws; r += 2) want[static_cast<size_t>(r)] = 1.5;
  check_sparse_result(xs[0], floats(want, DType::Float64));

  // Nobody has entries: the result is an empty sparse tensor of the right shape.
  TensorList none{SparseTensor(zeros({1, 0}, DType::Int64), zeros({0}), {3}).to_tensor()};
  finish(pg->allreduce(none));
  check_sparse_result(none[0], zeros({3}));
}
