// UnshardedStorage (parallel/fsdp/unsharded_storage.h): on the CPU, release() gives the pages back while
// the address (and every alias of the storage, as autograd's saved tensors hold them) stays valid.
#include <catch2/catch.hpp>

#include "parallel/fsdp/unsharded_storage.h"
#include "tensor/compare.h"
#include "tensor/factory.h"

namespace braid::parallel::fsdp {
namespace {

TEST_CASE("fsdp unsharded storage: release keeps the address and zeroes the contents", "[fsdp]") {
  UnshardedStorage storage(3000, DType::Float32, Device::cpu());
  REQUIRE(storage.releases_memory());
  const Tensor saved = storage.flat().alias();  // what a SavedTensor would hold
  const void* address = saved.data_ptr();
  storage.flat().fill_(2.5);
  CHECK(equal(saved, full({3000}, 2.5)));
  storage.release();
  CHECK(saved.data_ptr() == address);
  CHECK(equal(saved, zeros({3000})));  // the kernel hands back fresh zero pages on the next touch
  storage.flat().fill_(1.0);           // refilled in place, as the all-gather before backward does
  CHECK(equal(saved, full({3000}, 1.0)));
}

TEST_CASE("fsdp unsharded storage: an empty unit allocates nothing to release", "[fsdp]") {
  UnshardedStorage storage(0, DType::Float64, Device::cpu());
  CHECK_FALSE(storage.releases_memory());
  CHECK(storage.flat().numel() == 0);
  storage.release();  // a no-op
}

}  // namespace
}  // namespace braid::parallel::fsdp
