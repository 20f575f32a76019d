#include "tensor/storage.h"

#include "tensor/allocator.h"
#include "tensor/cuda/device_api.h"

namespace braid {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  if (device.is_cpu()) {
    void* p = CpuAllocator::instance().allocate(nbytes);
    return std::shared_ptr<Storage>(
        new Storage(p, nbytes, device, [nbytes](void* q) { CpuAllocator::instance().deallocate(q, nbytes); }));
  }
  void* p = cuda::allocate(nbytes, device.index);
  const int index = device.index;
  return std::shared_ptr<Storage>(
      new Storage(p, nbytes, device, [nbytes, index](void* q) { cuda::deallocate(q, nbytes, index); }));
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Device device, Deleter deleter) {
  return std::shared_ptr<Storage>(new Storage(data, nbytes, device, std::move(deleter)));
}

Storage::Storage(void* data, size_t nbytes, Device device, Deleter deleter)
    : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)) {}

Storage::~Storage() {
  if (deleter_) deleter_(data_);
}

}  // namespace braid
