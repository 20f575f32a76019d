// Where DDP's own small collectives (the model check, the used-map, the rebuild order, join's counts) put
// their tensors: NCCL takes only CUDA tensors, so on an NCCL group they go to the parameters' GPU; the
// CPU engines take CPU tensors.
#pragma once

#include "collectives/process_group.h"
#include "tensor/tensor.h"

namespace braid::parallel {

inline Device control_device(const collectives::ProcessGroup& group, const Tensor& sample_param) {
  return group.backend_name() == "nccl" ? sample_param.device() : Device::cpu();
}

}  // namespace braid::parallel
