// device_api.h over the CUDA runtime, with a per-device caching allocator.
#include "tensor/cuda/device_api.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <vector>

#include "base/check.h"
#include "base/oom_error.h"
#include "base/logging.h"

namespace braid::cuda {
namespace {

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    BRAID_THROW(Error, "{}: CUDA error {} ({})", what, cudaGetErrorName(err), cudaGetErrorString(err));
  }
}

struct Probe {
  int count = 0;
  std::string reason;
};

const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    const cudaError_t err = cudaGetDeviceCount(&r.count);
    if (err != cudaSuccess) {
      r.count = 0;
      r.reason = std::string("CUDA runtime reports ") + cudaGetErrorString(err);
      (void)cudaGetLastError();  // clear the sticky error so later calls start clean
    } else if (r.count == 0) {
      r.reason = "no CUDA device found";
    }
    return r;
  }();
  return p;
}

std::string version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

// Caches freed device blocks by rounded size, per device: cudaMalloc/cudaFree synchronise the device and
// cost far more than the kernels that use the memory.
class CudaCache {
 public:
  void* allocate(size_t nbytes, int device) {
    const size_t size = round(nbytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& list = free_[{device, size}];
      if (!list.empty()) {
        void* p = list.back();
        list.pop_back();
        return p;
      }
    }
    int prev = 0;
    check_cuda(cudaGetDevice(&prev), "cudaGetDevice");
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, size);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_all();
      err = cudaMalloc(&p, size);
    }
    (void)cudaSetDevice(prev);
    if (err != cudaSuccess) {
      BRAID_THROW(OutOfMemoryError, "CUDA out of memory: allocating {} bytes on cuda:{} failed ({})", size, device,
                  cudaGetErrorString(err));
    }
    return p;
  }

  void deallocate(void* p, size_t nbytes, int device) {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    free_[{device, round(nbytes)}].push_back(p);
  }

  void release_all() {
    std::map<std::pair<int, size_t>, std::vector<void*>> blocks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocks.swap(free_);
    }
    for (auto& [key, list] : blocks) {
      for (void* p : list) (void)cudaFree(p);
    }
  }

 private:
  static size_t round(size_t n) { return n <= 512 ? 512 : (n + 511) / 512 * 512; }

  std::mutex mu_;
  std::map<std::pair<int, size_t>, std::vector<void*>> free_;  // GUARDED_BY(mu_)
};

CudaCache& cache() {
  static CudaCache* c = new CudaCache();  // leaked: freed storages may arrive during static destruction
  return *c;
}

}  // namespace

bool is_built() { return true; }
int device_count() { return probe().count; }
std::string unavailable_reason() { return probe().reason; }

std::string runtime_version() {
  int v = 0;
  return cudaRuntimeGetVersion(&v) == cudaSuccess ? version_string(v) : "unknown";
}

std::string driver_version() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess || v == 0) return "no driver";
  return version_string(v);
}

std::string device_name(int index) {
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  return prop.name;
}

void check_device(const Device& device, const char* op) {
  if (!device.is_cuda()) return;
  BRAID_CHECK_ARG(device_count() > 0, "{}: CUDA device {} requested but no CUDA device is usable ({})", op,
                  device.str(), unavailable_reason());
  BRAID_CHECK_ARG(device.index < device_count(), "{}: CUDA device {} requested but only {} device(s) exist", op,
                  device.str(), device_count());
}

void* allocate(size_t nbytes, int device) {
  check_device(Device::cuda(device), "cuda allocate");
  return cache().allocate(nbytes, device);
}

void deallocate(void* ptr, size_t nbytes, int device) { cache().deallocate(ptr, nbytes, device); }

void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (nbytes == 0) return;
  cudaMemcpyKind kind = cudaMemcpyDefault;  // unified addressing resolves the direction
  if (dst_device.is_cpu() && src_device.is_cpu()) kind = cudaMemcpyHostToHost;
  check_cuda(cudaMemcpy(dst, src, nbytes, kind), "cudaMemcpy");
}

void synchronize(int device) {
  int prev = 0;
  check_cuda(cudaGetDevice(&prev), "cudaGetDevice");
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  (void)cudaSetDevice(prev);
}

}  // namespace braid::cuda
