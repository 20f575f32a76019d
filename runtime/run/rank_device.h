// Where this rank computes: the job's device for its role (job_spec.h DevicesSpec), made concrete.
//
// A CUDA rank takes cuda:<local rank> among the devices this process sees, so that CUDA_VISIBLE_DEVICES
// (which the CUDA runtime applies before braid counts devices) chooses them as it does for PyTorch's
// torchrun jobs. With more ranks on a host than devices, ranks share devices (local rank modulo the
// count): fine for workers and RPC, refused by NCCL for two trainers of one group, which the trainers'
// group check names (check_trainer_devices). The master never computes: it stays on the CPU.
#pragma once

#include <map>
#include <string>

#include "runtime/job/job_spec.h"
#include "runtime/run/roles.h"
#include "tensor/device.h"

namespace braid::runtime {

// What the process can see, injected so that tests can ask "what if this host had 2 GPUs".
struct DeviceInventory {
  int cuda_count = 0;
  std::string unavailable_reason;  // why cuda_count is 0 ("no CUDA driver found", "built without CUDA")
};
DeviceInventory local_devices();

// The device of `rank` (role `role`, local rank `local_rank`, -1: unknown, then the rank stands in).
// InvalidArgument "the job asks for device cuda on rank 2 (trainer), but this host has no CUDA device
// (<why>)" when the role is on CUDA and none is usable.
Device rank_device(const JobSpec& job, Role role, int rank, int local_rank, const DeviceInventory& inventory);

// Two trainers of one NCCL group on one host and device: NCCL refuses them with "Duplicate GPU detected"
// deep inside ncclCommInitRank. `placement` maps each trainer rank to "host cuda:N"; InvalidArgument naming
// both ranks, the host and the device, with what to change.
void check_trainer_devices(const JobSpec& job, const std::map<int, std::string>& placement);

}  // namespace braid::runtime
