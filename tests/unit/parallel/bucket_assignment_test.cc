// compute_bucket_assignment_by_size against the cases of PyTorch's ComputeBucketAssignmentTest.
#include <catch2/catch.hpp>

#include "parallel/ddp/bucket_assignment.h"
#include "tensor/factory.h"

namespace braid::parallel {
namespace {

using Buckets = std::vector<std::vector<size_t>>;
using Limits = std::vector<size_t>;

std::vector<Tensor> alternating_f32_f64() {
  std::vector<Tensor> t;
  for (int i = 0; i < 3; ++i) {
    t.push_back(zeros({50}, DType::Float32));  // 200 bytes
    t.push_back(zeros({25}, DType::Float64));  // 200 bytes
  }
  return t;
}

TEST_CASE("bucket assignment: one dtype, a bucket closes when it reaches its limit", "[parallel][buckets]") {
  const std::vector<Tensor> t{zeros({100}), zeros({200}), zeros({100}), zeros({50})};
  const auto a = compute_bucket_assignment_by_size(t, {400});
  CHECK(a.buckets == Buckets{{0}, {1}, {2}, {3}});
  CHECK(a.limits == Limits{400, 400, 400, 400});
}

TEST_CASE("bucket assignment: dtypes fill buckets of their own", "[parallel][buckets]") {
  const auto a = compute_bucket_assignment_by_size(alternating_f32_f64(), {400});
  CHECK(a.buckets == Buckets{{0, 2}, {1, 3}, {4}, {5}});
  CHECK(a.limits == Limits{400, 400, 400, 400});
}

TEST_CASE("bucket assignment: each dtype walks the limits, the last repeats", "[parallel][buckets]") {
  const std::vector<Tensor> t{zeros({10}), zeros({10}), zeros({10}), zeros({10})};
  const auto a = compute_bucket_assignment_by_size(t, {40, 80});
  CHECK(a.buckets == Buckets{{0}, {1, 2}, {3}});
  CHECK(a.limits == Limits{40, 80, 80});
  const auto b = compute_bucket_assignment_by_size(alternating_f32_f64(), {200, 400});
  CHECK(b.buckets == Buckets{{0}, {1}, {2, 4}, {3, 5}});
  CHECK(b.limits == Limits{200, 200, 400, 400});
}

TEST_CASE("bucket assignment: sparse tensors get a bucket each; a walk order is honoured", "[parallel][buckets]") {
  const std::vector<Tensor> t{zeros({10}), zeros({10}), zeros({10})};
  const auto a = compute_bucket_assignment_by_size(t, {1000}, {false, true, false});
  CHECK(a.buckets == Buckets{{0, 2}, {1}});
  const auto b = compute_bucket_assignment_by_size(t, {40}, {}, {2, 1, 0});
  CHECK(b.buckets == Buckets{{0}, {1}, {2}});
  CHECK_THROWS_WITH(compute_bucket_assignment_by_size(t, {}), Catch::Contains("at least one size limit"));
  CHECK_THROWS_WITH(compute_bucket_assignment_by_size(t, {40}, {}, {0, 0, 1}), Catch::Contains("repeated"));
}

}  // namespace
}  // namespace braid::parallel
