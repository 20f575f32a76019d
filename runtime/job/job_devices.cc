// The device keys: `device` (every computing role) and `devices` (per role), and the backend they allow.
#include "base/error.h"
#include "runtime/job/job_fields.h"
#include "runtime/job/job_parse.h"

namespace braid::runtime::job_detail {

DevicesSpec parse_devices(const Fields& top) {
  static const EnumNames<DeviceKind> kDevices = {{"cpu", DeviceKind::Cpu}, {"cuda", DeviceKind::Cuda}};
  DevicesSpec out;
  top.read_enum<DeviceKind>("device", out.all, kDevices);
  // The master drives the job and computes nothing: it has no device to choose.
  Fields f(top.raw("devices"), "devices", {"trainers", "workers"});
  for (auto [key, slot] : {std::pair{"trainers", &out.trainers}, std::pair{"workers", &out.workers}}) {
    if (!f.has(key)) continue;
    DeviceKind d = DeviceKind::Cpu;
    f.read_enum<DeviceKind>(key, d, kDevices);
    *slot = d;
  }
  return out;
}

void check_backend_device(const JobSpec& job) {
  if (job.backend == Backend::Nccl && job.devices.trainer() != DeviceKind::Cuda) {
    fail("backend", "nccl reduces CUDA tensors, but the trainers compute on the CPU: set device: cuda (or "
                    "devices.trainers: cuda), or choose backend gloo or mpi");
  }
}

}  // namespace braid::runtime::job_detail
