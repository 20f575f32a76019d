#include "collectives/registry/engine_factory.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "base/check.h"
#include "base/config.h"
#include "base/logging.h"
#include "collectives/mpi/mpi_engine.h"
#include "collectives/queue/engine_process_group.h"
#include "collectives/shm/shm_engine.h"
#if BRAID_HAVE_GLOO
#include "collectives/gloo/gloo_engine.h"
#endif
#if BRAID_HAVE_NCCL
#include "collectives/nccl/nccl_engine.h"
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

namespace {

std::unique_ptr<Engine> make_network_engine(const std::string& backend, const BackendOptions& options) {
  if (backend == "mpi") return make_mpi_engine(options);
#if BRAID_HAVE_GLOO
  if (backend == "gloo") return make_gloo_engine(options);
#else
  BRAID_CHECK_ARG(backend != "gloo", "process group backend 'gloo' was not built: install libgloo-dev and "
                  "configure with -DBRAID_WITH_GLOO=ON");
#endif
#if BRAID_HAVE_NCCL
  if (backend == "nccl") return make_nccl_engine(options);
#else
  BRAID_CHECK_ARG(backend != "nccl", "process group backend 'nccl' was not built: configure with "
                  "-DBRAID_WITH_NCCL=ON and the CUDA toolkit and NCCL in BRAID_CUDA_HOME");
#endif
  BRAID_THROW(InvalidArgument, "unknown process group backend '{}' (available: {})", backend,
              fmt::join(available_backends(), ", "));
}

}  // namespace

std::shared_ptr<ProcessGroup> create_process_group(const std::string& backend, const BackendOptions& options) {
  GroupShape shape{options.rank, options.size, options.group_name};
  // The policy first: a bad size in the options or the environment fails before any connection is made.
  EnginePolicy policy = EnginePolicy::resolve(backend, options);
  std::unique_ptr<Engine> network = make_network_engine(backend, options);
  // The shared-memory engine serves CPU engines of groups that can meet in a store; whether the ranks share
  // a host it finds out itself, collectively, on first use.
  std::unique_ptr<Engine> local;
  if (network->accepts_cpu() && options.store && options.size > 1 && policy.local_enabled) {
    shm::ShmEngine::Limits limits;
    limits.staging_max_bytes = policy.local_max_bytes;
    limits.pool_min_bytes = policy.pool_min_bytes;
    limits.pool_bytes = static_cast<size_t>(policy.pool_bytes);
    local = std::make_unique<shm::ShmEngine>(shape, options.store, network->lanes(), options.timeout, limits);
  }
  EngineProcessGroup::Config config;
  config.store = options.store;
  config.timeout = options.timeout;
  config.policy = policy;
  config.stall_warn = options.stall_warn;
  config.trace_buffer_size = options.trace_buffer_size;
  config.desync_check = options.desync_check;
  auto group = std::make_shared<EngineProcessGroup>(std::move(shape), std::move(network), std::move(local),
                                                    std::move(config));
  logging::get("braid.collectives")
      ->debug("group '{}' (rank {}/{}, {}): {}", options.group_name, options.rank, options.size, backend,
              policy.describe());
  return group;
}

}  // namespace braid::collectives
