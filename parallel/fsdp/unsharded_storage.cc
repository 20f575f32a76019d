#include "parallel/fsdp/unsharded_storage.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/check.h"
#include "base/error.h"
#include "tensor/allocator.h"

namespace braid::parallel::fsdp {

UnshardedStorage::UnshardedStorage(int64_t numel, DType dtype, Device device) {
  const size_t nbytes = static_cast<size_t>(numel) * element_size(dtype);
  if (!device.is_cpu() || nbytes == 0) {
    flat_ = Tensor::empty({numel}, TensorOptions(dtype, device));
    return;
  }
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = (nbytes + page - 1) / page * page;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    BRAID_THROW(Error, "fsdp: cannot map {} bytes for a unit's unsharded parameters: {}", bytes, std::strerror(errno));
  }
  mapping_ = p;
  mapped_bytes_ = bytes;
  // The storage owns the mapping: tensors saved for backward may outlive the unit.
  auto storage = Storage::wrap(p, nbytes, device, [bytes](void* q) { munmap(q, bytes); });
  flat_ = Tensor::from_storage(std::move(storage), {numel}, {1}, 0, dtype);
}

UnshardedStorage::~UnshardedStorage() {
  if (resident_) CpuAllocator::instance().note_external(-static_cast<int64_t>(mapped_bytes_));
}

void UnshardedStorage::will_fill() {
  if (mapped_bytes_ == 0 || resident_) return;
  CpuAllocator::instance().note_external(static_cast<int64_t>(mapped_bytes_));
  resident_ = true;
}

void UnshardedStorage::release() {
  if (mapped_bytes_ == 0) return;
  if (madvise(mapping_, mapped_bytes_, MADV_DONTNEED) != 0) {
    BRAID_THROW(Error, "fsdp: madvise(MADV_DONTNEED) of {} bytes failed: {}", mapped_bytes_, std::strerror(errno));
  }
  if (resident_) CpuAllocator::instance().note_external(-static_cast<int64_t>(mapped_bytes_));
  resident_ = false;
}

}  // namespace braid::parallel::fsdp
