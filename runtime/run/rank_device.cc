#include "runtime/run/rank_device.h"

#include <fmt/format.h>

#include "base/check.h"
#include "tensor/cuda/device_api.h"

namespace braid::runtime {

DeviceInventory local_devices() {
  DeviceInventory out;
  try {
    out.cuda_count = cuda::device_count();
    if (out.cuda_count == 0) {
      out.unavailable_reason = cuda::is_built() ? cuda::unavailable_reason() : "braid was built without CUDA";
    }
  } catch (const std::exception& e) {  // a driver that fails to start is a host without a usable GPU
    out.cuda_count = 0;
    out.unavailable_reason = e.what();
  }
  return out;
}

Device rank_device(const JobSpec& job, Role role, int rank, int local_rank, const DeviceInventory& inventory) {
  const DeviceKind kind = role == Role::Trainer  ? job.devices.trainer()
                          : role == Role::Worker ? job.devices.worker()
                                                 : DeviceKind::Cpu;
  if (kind == DeviceKind::Cpu) return Device::cpu();
  BRAID_CHECK_ARG(inventory.cuda_count > 0,
                  "{}: the job asks for device cuda on rank {} ({}), but this host has no CUDA device ({}); run it "
                  "on a GPU host or set device: cpu",
                  job.file, rank, role_name(role),
                  inventory.unavailable_reason.empty() ? "none visible" : inventory.unavailable_reason);
  const int local = local_rank >= 0 ? local_rank : rank;
  return Device::cuda(local % inventory.cuda_count);
}

void check_trainer_devices(const JobSpec& job, const std::map<int, std::string>& placement) {
  if (trainers_backend(job) != Backend::Nccl) return;
  std::map<std::string, int> first;
  for (int t : job.roles.trainers) {
    const auto it = placement.find(t);
    if (it == placement.end()) continue;
    const auto [seen, fresh] = first.emplace(it->second, t);
    BRAID_CHECK_ARG(fresh,
                    "{}: trainers rank {} and rank {} are both on {}, and NCCL cannot put two ranks of one group "
                    "on one device: give that host as many visible GPUs as trainers (CUDA_VISIBLE_DEVICES), "
                    "start fewer trainers per host, or set devices.trainers: cpu",
                    job.file, seen->second, t, it->second);
  }
}

}  // namespace braid::runtime
