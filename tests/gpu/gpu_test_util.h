// What the GPU tests share: the skip rule (a test without a usable GPU returns early, saying why), test
// values and the CUDA-against-CPU comparison, and a one-rank NCCL group on device 0 over an in-process store.
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "tensor/compare.h"
#include "tensor/cuda/device_api.h"
#include "tensor/factory.h"

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

// Deterministic test values (no dependence on the ops under test): floats in [-6, 6) with two decimals,
// integers in [-15, 15] (uint8: [0, 30]), bools alternating irregularly. `nonneg` keeps everything >= 0.
inline Tensor sample(DType dtype, const Shape& shape, uint64_t seed, bool nonneg = false) {
  uint64_t state = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int64_t>((state >> 33) % 1201);  // 0..1200
  };
  const bool unsigned_like = nonneg || dtype == DType::UInt8 || dtype == DType::Bool;
  std::vector<double> values(static_cast<size_t>(shape_numel(shape)));
  for (double& v : values) {
    const int64_t r = next();
    if (is_floating(dtype)) {
      v = unsigned_like ? static_cast<double>(r) / 100.0 : static_cast<double>(r - 600) / 100.0;
    } else if (dtype == DType::Bool) {
      v = static_cast<double>(r % 3 == 0);
    } else {
      v = unsigned_like ? static_cast<double>(r % 31) : static_cast<double>(r % 31 - 15);
    }
  }
  return from_vector(values, shape).to(dtype);
}

inline std::string dname(DType d) { return std::string(dtype_name(d)); }

// Same dtype, shape and bytes (compared on the CPU, contiguous).
inline bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor x = a.cpu().contiguous();
  const Tensor y = b.cpu().contiguous();
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

// CUDA result `gpu` against CPU result `cpu`: exact for integers and bool, within the dtype's rounding
// for floats (NaN matches NaN).
inline void check_matches(const Tensor& gpu, const Tensor& cpu, double scale = 1.0) {
  REQUIRE(gpu.is_cuda());
  const Tensor g = gpu.cpu();
  REQUIRE(g.dtype() == cpu.dtype());
  REQUIRE(g.shape() == cpu.shape());
  if (!is_floating(cpu.dtype())) {
    CHECK(equal(g, cpu));
    return;
  }
  double rtol = 1e-5, atol = 1e-6;
  switch (cpu.dtype()) {
    case DType::Float16: rtol = 2e-3, atol = 1e-3; break;
    case DType::BFloat16: rtol = 1.6e-2, atol = 1e-2; break;
    case DType::Float64: rtol = 1e-12, atol = 1e-12; break;
    default: break;
  }
  CHECK(allclose(g, cpu, rtol * scale, atol * scale, /*equal_nan=*/true));
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
