// A Storage is one block of memory on one device; tensors are strided views onto a shared Storage.
// It also carries the version counter that every view of it shares: in-place writes bump it, and autograd
// compares it with the version it saved to detect a tensor modified after it was saved for backward.
//
// Thread-safety: a Storage's metadata is immutable; the version counter is atomic. Data races on the bytes
// themselves are the caller's to avoid, as with any array.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "tensor/device.h"

namespace braid {

class Storage {
 public:
  using Deleter = std::function<void(void*)>;

  // Allocates `nbytes` on `device` (CPU: the caching allocator; CUDA: the CUDA caching allocator).
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device);
  // Wraps memory the caller owns; `deleter` (may be empty) runs when the last tensor lets go.
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, Device device, Deleter deleter);

  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  void bump_version() { version_.fetch_add(1, std::memory_order_acq_rel); }

 private:
  Storage(void* data, size_t nbytes, Device device, Deleter deleter);

  void* data_;
  size_t nbytes_;
  Device device_;
  Deleter deleter_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace braid
