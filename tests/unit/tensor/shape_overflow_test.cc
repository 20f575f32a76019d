// Tensor::empty and SparseTensor refuse shapes whose strides, element count or byte count overflow int64
// (found by fuzz/fuzz_state_dict.cc: a state-dict tensor of shape [0, 2^55, 2^55] overflowed in
// shape_numel, which is undefined behaviour; and by fuzz/fuzz_rpc_value.cc: a sparse tensor's size did
// the same in to_tensor()'s strides).
#include <catch2/catch.hpp>

#include <cstdint>

#include "base/error.h"
#include "base/oom_error.h"
#include "tensor/factory.h"
#include "tensor/sparse.h"
#include "tests/support/error_of.h"

using namespace braid;
using braid::testing::error_of;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t kHuge = int64_t{1} << 40;

TEST_CASE("empty: an empty shape whose other sizes overflow is refused", "[tensor]") {
  CHECK_THAT(error_of([] { (void)empty({0, kHuge, kHuge}); }),
             Contains("empty: shape [0, 1099511627776, 1099511627776] of float32 is too large"));
  CHECK_THROWS_AS(empty({kHuge, kHuge, 0}), InvalidArgument);
}

TEST_CASE("empty: a byte count past 2^63 is refused, not wrapped", "[tensor]") {
  // 2^61 float64 elements are 2^64 bytes: the size_t product would wrap to 0 and allocate nothing. No
  // size is 0, so this is memory the machine cannot have (tests/unit/tensor/out_of_memory_test.cc).
  CHECK_THROWS_AS(empty({int64_t{1} << 61}, DType::Float64), OutOfMemoryError);
}

TEST_CASE("empty: large but representable empty shapes are still made", "[tensor]") {
  const Tensor t = empty({0, kHuge}, DType::Float32);
  CHECK(t.numel() == 0);
  CHECK(t.shape() == Shape{0, kHuge});
  CHECK(t.strides() == Shape{kHuge, 1});
}

TEST_CASE("SparseTensor: a size whose strides overflow is refused", "[tensor][sparse]") {
  // One entry at (0, 0) of a 2^40 x 2^40 sparse matrix: 2^80 elements.
  const Tensor indices = from_vector<int64_t>({0, 0}, {2, 1});
  const Tensor values = from_vector<float>({1.f}, {1});
  CHECK_THAT(error_of([&] { (void)SparseTensor(indices, values, {kHuge, kHuge}); }),
             Contains("SparseTensor: size [1099511627776, 1099511627776] is too large"));
  CHECK_NOTHROW(SparseTensor(indices, values, {kHuge, 1}));
}

}  // namespace
