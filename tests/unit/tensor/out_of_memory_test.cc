// An allocation that cannot be served ends in braid::OutOfMemoryError naming the bytes asked for and the
// tensor's shape, dtype and device, never in a bare std::bad_alloc; a shape whose byte count overflows
// int64 is refused before anything is allocated.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "base/oom_error.h"
#include "tensor/allocator.h"
#include "tensor/factory.h"

namespace braid {

namespace {

std::string oom_message(const Shape& shape, DType dtype) {
  try {
    empty(shape, TensorOptions(dtype));
  } catch (const OutOfMemoryError& e) {
    return e.what();
  }
  FAIL("expected an OutOfMemoryError");
  return "";
}

}  // namespace

TEST_CASE("out of memory: a tensor no address space can hold names its shape, dtype and bytes", "[core][allocator]") {
  // 2^62 bytes: more than any x86-64 or arm64 address space (2^57 with 5-level paging) maps, even where
  // the kernel overcommits memory, so the allocation fails without touching a page.
  const AllocatorStats before = CpuAllocator::instance().stats();
  const std::string message = oom_message({int64_t{1} << 60}, DType::Float32);
  CHECK_THAT(message, Catch::Contains("empty: out of memory for a float32 tensor of shape [1152921504606846976] on "
                                      "cpu (4611686018427387904 bytes"));
  CHECK_THAT(message, Catch::Contains("CPU allocator: cannot allocate"));
  // The failed request left no trace in the allocator's counters, and a later, sane allocation works.
  CHECK(CpuAllocator::instance().stats().allocated_bytes == before.allocated_bytes);
  CHECK(CpuAllocator::instance().stats().peak_bytes == before.peak_bytes);
  CHECK(empty({16}).numel() == 16);
}

TEST_CASE("out of memory: a shape whose size overflows is refused before allocating", "[core][allocator]") {
  CHECK_THAT(oom_message({int64_t{1} << 40, int64_t{1} << 40}, DType::Float64),
             Catch::Contains("empty: a float64 tensor of shape [1099511627776, 1099511627776] has more bytes than an "
                             "int64 holds"));
  // Beyond half the address space the allocator refuses the size itself rather than round it up (and wrap).
  CHECK_THROWS_AS(CpuAllocator::instance().allocate(~size_t{0} - 8), OutOfMemoryError);
}

}  // namespace braid
