#include "collectives/nccl/cuda_handles.h"

#include "base/check.h"

namespace braid::collectives::nccl {

void check_cuda(cudaError_t err, std::string_view call, std::string_view what) {
  if (err == cudaSuccess) return;
  BRAID_THROW(CommError, "{}: {} failed: CUDA error {} ({})", what, call, cudaGetErrorName(err),
              cudaGetErrorString(err));
}

DeviceGuard::DeviceGuard(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice", "nccl");
  if (previous_ != device) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice", "nccl");
    switched_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (switched_) (void)cudaSetDevice(previous_);
}

CudaStream::CudaStream(int device) {
  DeviceGuard guard(device);
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags",
             "nccl stream");
}

CudaStream::~CudaStream() {
  // Work still queued on the stream (after an abort) finishes on its own; the handle is released then.
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

CudaEvent::CudaEvent() {
  check_cuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreateWithFlags", "nccl event");
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
}

void order_after_default_stream(cudaStream_t stream, cudaEvent_t scratch, std::string_view what) {
  check_cuda(cudaEventRecord(scratch, cudaStreamLegacy), "cudaEventRecord(default stream)", what);
  check_cuda(cudaStreamWaitEvent(stream, scratch, 0), "cudaStreamWaitEvent", what);
}

}  // namespace braid::collectives::nccl
