// RAII over the few CUDA runtime objects the NCCL engine owns: a device guard, a stream and an event.
// The engine's threads (lanes, the p2p completion thread, the watchdog) are not the user's threads, so
// every entry point sets the device it needs with a DeviceGuard and restores the previous one.
#pragma once

#include <cuda_runtime.h>

#include <string_view>

namespace braid::collectives::nccl {

// Throws CommError "<what>: <call> failed: CUDA error <name> (<text>)" unless err is cudaSuccess.
void check_cuda(cudaError_t err, std::string_view call, std::string_view what);

class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

// A non-blocking stream (cudaStreamNonBlocking): it never synchronizes implicitly with the legacy default
// stream that braid's tensor kernels and copies use, so ordering with them is explicit (events) and a
// hung NCCL kernel cannot stall unrelated default-stream work.
class CudaStream {
 public:
  explicit CudaStream(int device);
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// An event without timing (the cheapest kind to record and query).
class CudaEvent {
 public:
  CudaEvent();
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Makes `stream` wait for everything issued so far on the legacy default stream of the current device,
// where braid's tensor kernels and copies run (docs/GPU.md): the producer of the op's inputs.
void order_after_default_stream(cudaStream_t stream, cudaEvent_t scratch, std::string_view what);

}  // namespace braid::collectives::nccl
