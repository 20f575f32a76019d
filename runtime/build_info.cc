#include "runtime/build_info.h"

#include <cblas.h>
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <string>

#include "base/config.h"
#include "tensor/cuda/device_api.h"

#if BRAID_HAVE_NCCL
#include <nccl.h>
#endif
#if BRAID_HAVE_UCX
#include <ucp/api/ucp.h>
#endif
#if BRAID_HAVE_GLOO
#include <gloo/config.h>
#endif

namespace braid::runtime {
namespace {

Component not_built(std::string name, const char* option) {
  return {std::move(name), false, {{"why", std::string("not built (CMake option ") + option + ")"}}};
}

// Runs a query that may throw (a CUDA call on a machine without a driver, say) and reports the failure
// as the value: `braid info` exists to diagnose such machines, so it must never stop half-way.
template <class F>
std::string ask(F&& query) {
  try {
    return query();
  } catch (const std::exception& e) {
    return std::string("unknown (") + e.what() + ")";
  }
}

Component cuda_component() {
  if (!cuda::is_built()) return not_built("CUDA", "BRAID_WITH_CUDA");
  return {"CUDA", true, {{"runtime", ask(cuda::runtime_version)}, {"driver", ask(cuda::driver_version)}}};
}

#if BRAID_HAVE_NCCL
// NCCL encodes versions as X*1000+Y*100+Z up to 2.8 and X*10000+Y*100+Z after (nccl.h, NCCL_VERSION).
std::string nccl_version_string(int code) {
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int rest = code >= 10000 ? code % 10000 : code % 1000;
  return std::to_string(major) + "." + std::to_string(rest / 100) + "." + std::to_string(rest % 100);
}
#endif

Component nccl_component() {
#if BRAID_HAVE_NCCL
  int code = 0;
  const std::string loaded =
      ncclGetVersion(&code) == ncclSuccess ? nccl_version_string(code) : std::string("unknown (ncclGetVersion failed)");
  return {"NCCL", true, {{"library", loaded}, {"headers", nccl_version_string(NCCL_VERSION_CODE)}}};
#else
  return not_built("NCCL", "BRAID_WITH_NCCL");
#endif
}

// MPI_Get_version and MPI_Get_library_version are among the few calls the standard allows before
// MPI_Init, so `braid info` works outside mpirun.
Component mpi_component() {
  int major = 0;
  int minor = 0;
  MPI_Get_version(&major, &minor);
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);
  (void)len;  // Open MPI counts the terminating NUL in it; the string is NUL-terminated anyway
  std::string library(text);
  // Open MPI's string is one line; other MPIs print several. Keep the first, without trailing blanks.
  library.resize(std::min(library.find('\n'), library.size()));
  while (!library.empty() && std::isspace(static_cast<unsigned char>(library.back()))) library.pop_back();
  return {"MPI", true, {{"library", library}, {"standard", std::to_string(major) + "." + std::to_string(minor)}}};
}

Component ucx_component() {
#if BRAID_HAVE_UCX
  return {"UCX", true,
          {{"library", ucp_get_version_string()},
           {"headers", std::to_string(UCP_API_MAJOR) + "." + std::to_string(UCP_API_MINOR)}}};
#else
  return not_built("UCX", "BRAID_WITH_UCX");
#endif
}

Component gloo_component() {
#if BRAID_HAVE_GLOO
  // Gloo has no run-time version query; its installed headers are the only source.
  return {"Gloo", true,
          {{"headers", std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) + "." +
                           std::to_string(GLOO_VERSION_PATCH)}}};
#else
  return not_built("Gloo", "BRAID_WITH_GLOO");
#endif
}

Component blas_component() {
  std::string threading;
  switch (openblas_get_parallel()) {
    case 0: threading = "sequential"; break;
    case 1: threading = "pthreads"; break;
    case 2: threading = "OpenMP"; break;
    default: threading = "unknown"; break;
  }
  std::string config = openblas_get_config();
  while (!config.empty() && std::isspace(static_cast<unsigned char>(config.back()))) config.pop_back();
  return {"BLAS",
          true,
          {{"library", config},
           {"threads", std::to_string(openblas_get_num_threads()) + " (" + threading + ")"}}};
}

Devices visible_devices() {
  Devices d;
  d.cpu_cores_online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t mask;
  CPU_ZERO(&mask);
  d.cpu_cores_usable = sched_getaffinity(0, sizeof(mask), &mask) == 0 ? CPU_COUNT(&mask) : d.cpu_cores_online;
  try {
    const int n = cuda::device_count();
    for (int i = 0; i < n; ++i) d.cuda_devices.push_back(ask([i] { return cuda::device_name(i); }));
    if (n == 0) d.cuda_unavailable = cuda::unavailable_reason();
  } catch (const std::exception& e) {
    d.cuda_unavailable = e.what();
  }
  return d;
}

}  // namespace

BuildInfo gather_build_info() {
  BuildInfo info;
  info.version = BRAID_VERSION;
  info.build_type = BRAID_BUILD_TYPE;
  info.compiler = BRAID_CXX_COMPILER;
  info.sanitizers = std::string(BRAID_SANITIZE_FLAGS).empty() ? "none" : BRAID_SANITIZE_FLAGS;
  info.components = {cuda_component(), nccl_component(), mpi_component(),
                     ucx_component(),  gloo_component(), blas_component()};
  info.devices = visible_devices();
  return info;
}

std::string version_line() { return std::string("braid ") + BRAID_VERSION + " (" + BRAID_BUILD_TYPE + ")"; }

}  // namespace braid::runtime
