// device_api.h for builds without CUDA.
#include "base/check.h"
#include "tensor/cuda/device_api.h"

namespace braid::cuda {
namespace {
[[noreturn]] void not_built(const char* what) {
  BRAID_THROW(InvalidArgument, "{}: braid was built without CUDA (configure with -DBRAID_WITH_CUDA=ON)", what);
}
}  // namespace

bool is_built() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() { return "braid was built without CUDA"; }
std::string runtime_version() { return "off"; }
std::string driver_version() { return "off"; }
std::string device_name(int) { not_built("cuda::device_name"); }
void* allocate(size_t, int) { not_built("cuda allocate"); }
void deallocate(void*, size_t, int) {}
void copy(void*, Device, const void*, Device, size_t) { not_built("cuda copy"); }
void synchronize(int) { not_built("cuda synchronize"); }
void check_device(const Device& device, const char* op) {
  if (device.is_cuda()) not_built(op);
}

}  // namespace braid::cuda
