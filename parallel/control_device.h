// Where DDP's and FSDP's own small collectives (DDP's model check, used-map, rebuild order and join
// counts; FSDP's unit check and clip_grad_norm_'s norm) put their tensors: NCCL takes only CUDA tensors,
// so on an NCCL group they go to the parameters' GPU; the CPU engines take CPU tensors.
#pragma once

#include "collectives/core/process_group.h"
#include "tensor/tensor.h"

namespace braid::parallel {

inline Device control_device(const collectives::ProcessGroup& group, const Device& param_device) {
  return group.backend_name() == "nccl" ? param_device : Device::cpu();
}

inline Device control_device(const collectives::ProcessGroup& group, const Tensor& sample_param) {
  return control_device(group, sample_param.device());
}

}  // namespace braid::parallel
