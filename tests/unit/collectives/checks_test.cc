// The argument checks every backend runs before communicating (the error substrings torch's
// test_c10d_gloo.py _checks tests match, e.g. test_broadcast_checks' "invalid root rank").
#include <catch2/catch.hpp>

#include "collectives/core/checks.h"
#include "tensor/factory.h"
#include "tensor/sparse.h"

using namespace braid;
using namespace braid::collectives;
using Catch::Contains;

namespace {
checks::Caller caller(const char* op, int rank = 0, int size = 2) { return {"world", rank, size, "gloo", op}; }
}  // namespace

TEST_CASE("checks: broadcast root rank and root tensor", "[collectives][checks]") {
  auto c = caller("broadcast");
  REQUIRE_THROWS_WITH(checks::root_rank(c, -1), Contains("invalid root rank: -1") && Contains("group 'world', rank 0/2"));
  REQUIRE_THROWS_WITH(checks::root_rank(c, 2), Contains("invalid root rank"));
  REQUIRE_NOTHROW(checks::root_rank(c, 1));
  REQUIRE_THROWS_WITH(checks::root_tensor(c, -1, 1), Contains("invalid root tensor"));
  REQUIRE_THROWS_WITH(checks::root_tensor(c, 1, 1), Contains("invalid root tensor"));
  REQUIRE_THROWS_WITH(checks::root_tensor(c, 0, 0), Contains("invalid root tensor"));
}

TEST_CASE("checks: tensor type, size and layout report the true index", "[collectives][checks]") {
  auto c = caller("allreduce");
  const Tensor t1 = zeros({1}), t2 = zeros({1}, DType::Float64), t3 = zeros({2});
  REQUIRE_THROWS_WITH(checks::non_empty(c, {}), Contains("requires non-empty tensor list"));
  REQUIRE_THROWS_WITH(checks::same_type_and_size(c, {t1, t2}), Contains("invalid tensor type at index 1"));
  REQUIRE_THROWS_WITH(checks::same_type_and_size(c, {t1, t3}),
                      Contains("invalid tensor size at index 1 (expected [1], got [2])"));
  const Tensor s = SparseTensor(from_vector<int64_t>({0}, {1, 1}), ones({1}), {2}).to_tensor();
  REQUIRE_THROWS_WITH(checks::dense(c, {t1, s}), Contains("invalid tensor layout at index 1 (expected Strided, got Sparse)"));
  REQUIRE_THROWS_WITH(checks::all_sparse_or_dense(c, {t1, s}), Contains("invalid tensor layout at index"));
}

TEST_CASE("checks: reduction operations per dtype and layout", "[collectives][checks]") {
  auto c = caller("allreduce");
  for (auto op : {ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX}) {
    REQUIRE_THROWS_WITH(checks::reduce_op(c, op, DType::Float32, /*sparse=*/true),
                        Contains("unsupported reduction operation"));
  }
  REQUIRE_NOTHROW(checks::reduce_op(c, ReduceOp::SUM, DType::Float32, true));
  REQUIRE_THROWS_WITH(checks::reduce_op(c, ReduceOp::BAND, DType::Float32, false), Contains("unsupported reduction operation BAND"));
  REQUIRE_NOTHROW(checks::reduce_op(c, ReduceOp::BXOR, DType::Int32, false));
  REQUIRE_THROWS_WITH(checks::reduce_op(c, ReduceOp::AVG, DType::Int64, false), Contains("unsupported reduction operation AVG"));
}

TEST_CASE("checks: allgather output lists", "[collectives][checks]") {
  auto c = caller("allgather", 0, 2);
  const Tensor t1 = zeros({1}), t2 = zeros({1}, DType::Float64), t3 = zeros({2});
  REQUIRE_THROWS_WITH(checks::allgather_lists(c, {}, {}), Contains("requires non-empty input tensor list"));
  REQUIRE_THROWS_WITH(checks::allgather_lists(c, {}, {t1}),
                      Contains("requires input/output tensor lists to have the same length"));
  REQUIRE_THROWS_WITH(checks::allgather_lists(c, {{t1, t1}, {t1, t1}}, {t1}),
                      Contains("requires input/output tensor lists to have the same length"));
  REQUIRE_THROWS_WITH(checks::allgather_lists(c, {{t1}}, {t1}),
                      Contains("invalid output tensor list at index 0 (expected length 2, got 1)"));
  REQUIRE_THROWS_WITH(checks::allgather_lists(c, {{t1, t1, t1}}, {t1}), Contains("invalid output tensor list"));
  REQUIRE_THROWS_WITH(checks::allgather_lists(c, {{t1, t1, t1, t1}, {t1, t1, t1, t1}}, {t1, t2}),
                      Contains("invalid tensor type"));
  REQUIRE_THROWS_WITH(checks::allgather_lists(c, {{t1, t1, t1, t1}, {t1, t1, t1, t1}}, {t1, t3}),
                      Contains("invalid tensor size"));
  REQUIRE_THROWS_WITH(checks::allgather_lists(c, {{t1, t2}}, {t1}), Contains("invalid tensor type"));
  REQUIRE_THROWS_WITH(checks::allgather_lists(c, {{t1, t3}}, {t1}), Contains("invalid tensor size"));
  REQUIRE_NOTHROW(checks::allgather_lists(c, {{t1, t1}}, {t1}));
}

TEST_CASE("checks: gather and scatter lists on root and non-root", "[collectives][checks]") {
  const Tensor t = zeros({1});
  auto root = caller("gather", 0, 2), other = caller("gather", 1, 2);
  REQUIRE_THROWS_WITH(checks::gather_lists(root, -1, {}, {t}), Contains("invalid root rank"));
  REQUIRE_THROWS_WITH(checks::gather_lists(root, 0, {{t, t}}, {}), Contains("requires a single-element input tensor list"));
  REQUIRE_THROWS_WITH(checks::gather_lists(root, 0, {}, {t}), Contains("requires a single-element output list"));
  REQUIRE_THROWS_WITH(checks::gather_lists(root, 0, {{t}}, {t}),
                      Contains("Incorrect output list size 1. Output list size should be 2"));
  REQUIRE_THROWS_WITH(checks::gather_lists(other, 0, {{t, t}}, {t}), Contains("requires empty output on non-root"));
  REQUIRE_NOTHROW(checks::gather_lists(other, 0, {}, {t}));

  auto sroot = caller("scatter", 0, 2), sother = caller("scatter", 1, 2);
  REQUIRE_THROWS_WITH(checks::scatter_lists(sroot, 0, {}, {{t, t}}), Contains("requires a single-element output tensor list"));
  REQUIRE_THROWS_WITH(checks::scatter_lists(sroot, 0, {t}, {}), Contains("requires a single-element input list"));
  REQUIRE_THROWS_WITH(checks::scatter_lists(sroot, 0, {t}, {{t, t, t}}),
                      Contains("Incorrect input list size 3. Input list size should be 2"));
  REQUIRE_THROWS_WITH(checks::scatter_lists(sother, 0, {t}, {{t, t}}), Contains("requires empty input on non-root"));
  REQUIRE_THROWS_WITH(checks::scatter_lists(sroot, 0, {t}, {{t, zeros({1}, DType::Int64)}}), Contains("invalid tensor type"));
}
