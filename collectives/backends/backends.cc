#include "collectives/backends/backends.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "base/check.h"
#include "base/config.h"
#include "collectives/mpi/process_group_mpi.h"
#if BRAID_HAVE_GLOO
#include "collectives/gloo/process_group_gloo.h"
#endif
#if BRAID_HAVE_NCCL
#include "collectives/nccl/process_group_nccl.h"
#endif

namespace braid::collectives {

std::vector<std::string> available_backends() {
  std::vector<std::string> names;
#if BRAID_HAVE_GLOO
  names.emplace_back("gloo");
#endif
  names.emplace_back("mpi");
#if BRAID_HAVE_NCCL
  names.emplace_back("nccl");
#endif
  return names;
}

bool backend_available(const std::string& backend) {
  const auto names = available_backends();
  return std::find(names.begin(), names.end(), backend) != names.end();
}

std::shared_ptr<ProcessGroup> create_process_group(const std::string& backend, const BackendOptions& options) {
  if (backend == "mpi") return create_mpi_process_group(options);
#if BRAID_HAVE_GLOO
  if (backend == "gloo") return create_gloo_process_group(options);
#else
  BRAID_CHECK_ARG(backend != "gloo", "process group backend 'gloo' was not built: install libgloo-dev and "
                  "configure with -DBRAID_WITH_GLOO=ON");
#endif
#if BRAID_HAVE_NCCL
  if (backend == "nccl") return create_nccl_process_group(options);
#else
  BRAID_CHECK_ARG(backend != "nccl", "process group backend 'nccl' was not built: configure with "
                  "-DBRAID_WITH_NCCL=ON and the CUDA toolkit and NCCL in BRAID_CUDA_HOME");
#endif
  BRAID_THROW(InvalidArgument, "unknown process group backend '{}' (available: {})", backend,
              fmt::join(available_backends(), ", "));
}

}  // namespace braid::collectives
