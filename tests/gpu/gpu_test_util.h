// What the GPU tests share: the skip rule (a test without a usable GPU returns early, saying why) and a
// one-rank NCCL group on device 0 over an in-process store.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "base/config.h"
#include "tensor/cuda/device_api.h"

#if BRAID_HAVE_NCCL
#include "collectives/nccl/nccl_engine.h"
#include "store/hash_store.h"
#endif

namespace braid::gpu_test {

// True (and a warning naming the reason) when no CUDA device is usable.
inline bool no_gpu() {
  if (cuda::device_count() > 0) return false;
  WARN("skipped: no CUDA device (" << cuda::unavailable_reason() << ")");
  return true;
}

#if BRAID_HAVE_NCCL
inline std::shared_ptr<collectives::ProcessGroup> one_rank_nccl_group(const std::string& name,
                                                                      Millis timeout = Millis(60'000)) {
  collectives::BackendOptions options;
  options.rank = 0;
  options.size = 1;
  options.group_name = name;
  options.store = std::make_shared<store::HashStore>();
  options.timeout = timeout;
  options.cuda_device = 0;
  return collectives::create_nccl_process_group(options);
}
#endif

}  // namespace braid::gpu_test
