#include "collectives/registry/engine_factory.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "store/prefix_store.h"

#include "base/check.h"
#include "base/config.h"
#include "base/env.h"
#include "base/logging.h"
#include "collectives/core/host_layout.h"
#include "collectives/hier/hier_engine.h"
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

std::unique_ptr<Engine> make_shm_engine(const GroupShape& shape, const BackendOptions& options,
                                        const EnginePolicy& policy, int lanes) {
  shm::ShmEngine::Limits limits;
  limits.staging_max_bytes = policy.local_max_bytes;
  limits.pool_min_bytes = policy.pool_min_bytes;
  limits.pool_bytes = static_cast<size_t>(policy.pool_bytes);
  return std::make_unique<shm::ShmEngine>(shape, options.store, lanes, options.timeout, limits);
}

// The options of a sub-group of `options`' group: `members` (group ranks, ascending), named `suffix`,
// with its own part of the store.
BackendOptions sub_options(const BackendOptions& options, const std::vector<int>& members, const std::string& suffix) {
  BackendOptions o = options;
  o.group_name = options.group_name + "/" + suffix;
  o.size = static_cast<int>(members.size());
  o.rank = static_cast<int>(std::find(members.begin(), members.end(), options.rank) - members.begin());
  o.store = std::make_shared<store::PrefixStore>("hier/" + suffix + "/", options.store);
  o.global_ranks.clear();
  for (int m : members) {
    o.global_ranks.push_back(options.global_ranks.empty() ? m : options.global_ranks[static_cast<size_t>(m)]);
  }
  return o;
}

// The two-level engine of a group whose ranks span hosts with several on some (hier/hier_engine.h): this
// host's network and shared-memory engines, and the network engine over the ranks with this rank's local
// rank. Collective: every rank makes its local group first, then its cross-host one.
std::unique_ptr<Engine> make_hier_engine(const std::string& backend, const BackendOptions& options,
                                         const EnginePolicy& policy, HostLayout layout, int lanes) {
  const auto me = static_cast<size_t>(options.rank);
  const int host = layout.host_of[me];
  const int local_rank = layout.local_rank_of[me];
  hier::HierEngine::Parts parts;
  parts.local_policy = policy;
  parts.local_policy.hier_enabled = false;
  parts.local_policy.pool_bytes = 0;  // a step's buffers are never from empty_shared
  // Unless the staging's maximum was set, reduce_scatter steps stage every size (hier_engine.h).
  parts.local_scatter_policy = parts.local_policy;
  if (!options.shared_staging_max_bytes && !env::get("BRAID_SHM_STAGING_MAX_BYTES")) {
    parts.local_scatter_policy.local_max_bytes = EnginePolicy::default_local_max_bytes("gloo");
  }
  const auto& local_members = layout.hosts[static_cast<size_t>(host)];
  if (local_members.size() > 1) {
    const BackendOptions o = sub_options(options, local_members, fmt::format("host{}", host));
    parts.local_network = make_network_engine(backend, o);
    if (policy.local_enabled) {
      EnginePolicy shm_policy = parts.local_policy;
      shm_policy.local_max_bytes = std::max(parts.local_policy.local_max_bytes,
                                            parts.local_scatter_policy.local_max_bytes);
      parts.local_shm = make_shm_engine(GroupShape{o.rank, o.size, o.group_name}, o, shm_policy, lanes);
    }
  }
  const auto cross_members = layout.ranks_with_local_rank(local_rank);
  if (cross_members.size() > 1) {
    parts.cross = make_network_engine(backend, sub_options(options, cross_members, fmt::format("local{}", local_rank)));
  }
  parts.layout = std::move(layout);
  return std::make_unique<hier::HierEngine>(GroupShape{options.rank, options.size, options.group_name}, lanes,
                                            std::move(parts));
}

}  // namespace

std::shared_ptr<ProcessGroup> create_process_group(const std::string& backend, const BackendOptions& options) {
  GroupShape shape{options.rank, options.size, options.group_name};
  // The policy first: a bad size in the options or the environment fails before any connection is made.
  EnginePolicy policy = EnginePolicy::resolve(backend, options);
  std::unique_ptr<Engine> network = make_network_engine(backend, options);
  // Where the ranks are, for CPU engines of groups that can meet in a store (collective: every rank
  // publishes its host). A group on one host gets the shared-memory engine; one across hosts with several
  // ranks on some host gets the two-level engine, whose local level has its own.
  std::unique_ptr<Engine> local;
  std::unique_ptr<Engine> hier;
  const auto log = logging::get("braid.collectives");
  if (network->accepts_cpu() && options.store && options.size > 1 && (policy.local_enabled || policy.hier_enabled)) {
    HostLayout layout = HostLayout::exchange(*options.store, "hosts/", options.rank, options.size, options.timeout);
    log->debug("group '{}' (rank {}/{}, {}): {}", options.group_name, options.rank, options.size, backend,
               layout.describe());
    if (layout.host_count() == 1 && policy.local_enabled) {
      local = make_shm_engine(shape, options, policy, network->lanes());
    } else if (layout.two_levels() && policy.hier_enabled) {
      hier = make_hier_engine(backend, options, policy, std::move(layout), network->lanes());
    }
  }
  EngineProcessGroup::Config config;
  config.store = options.store;
  config.timeout = options.timeout;
  config.policy = policy;
  config.stall_warn = options.stall_warn;
  config.trace_buffer_size = options.trace_buffer_size;
  config.desync_check = options.desync_check;
  auto group = std::make_shared<EngineProcessGroup>(std::move(shape), std::move(network), std::move(local),
                                                    std::move(hier), std::move(config));
  log->debug("group '{}' (rank {}/{}, {}): {}", options.group_name, options.rank, options.size, backend,
              policy.describe());
  return group;
}

}  // namespace braid::collectives
