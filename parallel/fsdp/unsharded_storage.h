// UnshardedStorage: the memory of a unit's full (all-gathered) parameters, which FSDP must be able to give
// back between forward and backward while keeping its address.
//
// Why the address must stay: autograd saves tensors for backward as aliases of their storage
// (autograd/node.h, SavedTensor), so the tensors a Linear saved in forward point into this storage. PyTorch
// frees such memory with storage.resize_(0) and re-allocates it before backward; braid's Storage cannot
// change size. Instead, on the CPU the storage is an anonymous mapping of its own: release() hands its
// physical pages back to the kernel (madvise MADV_DONTNEED, the mapping stays, its bytes read as zero) and
// the all-gather before backward refills the same addresses. Writing through the collectives does not bump
// the storage's version counter, so the saved tensors stay valid.
//
// On other devices release() keeps the memory (CUDA would need the driver's virtual memory API); the unit
// still drops the module's view of it, so only saved tensors see it. docs/FSDP.md lists this.
//
// Thread-safety: used by one unit, from the thread that runs its forward and backward.
#pragma once

#include <cstdint>
#include <memory>

#include "tensor/tensor.h"

namespace braid::parallel::fsdp {

class UnshardedStorage {
 public:
  UnshardedStorage(int64_t numel, DType dtype, Device device);
  ~UnshardedStorage();
  UnshardedStorage(const UnshardedStorage&) = delete;
  UnshardedStorage& operator=(const UnshardedStorage&) = delete;

  // The flat tensor over the whole storage (numel elements). Its address never changes.
  const Tensor& flat() const { return flat_; }
  // Called before the storage is written (the all-gather): its pages become resident, and the CPU
  // allocator's stats count them (CpuAllocator::note_external) until release().
  void will_fill();
  // Gives the physical memory back where the device allows it; the next writer faults fresh pages in.
  void release();
  // Whether release() frees memory on this device (CPU mapping) or only forgets the contents.
  bool releases_memory() const { return mapped_bytes_ > 0; }

 private:
  Tensor flat_;
  void* mapping_ = nullptr;
  size_t mapped_bytes_ = 0;
  bool resident_ = false;  // filled since the last release()
};

}  // namespace braid::parallel::fsdp
