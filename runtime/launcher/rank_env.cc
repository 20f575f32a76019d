#include "runtime/launcher/rank_env.h"

#include <algorithm>
#include <string_view>

#include "base/check.h"

namespace braid::runtime::launcher {

const std::vector<std::string> kOuterLauncherVariables = {
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "SLURM_PROCID",         "SLURM_NTASKS",         "SLURM_LOCALID",
};

namespace {

constexpr const char* kSetByLauncher[] = {"RANK",        "WORLD_SIZE",  "LOCAL_RANK",       "LOCAL_WORLD_SIZE",
                                          "MASTER_ADDR", "MASTER_PORT", "BRAID_JOB_SECRET",
                                          "BRAID_RESTART_COUNT"};

bool removed(std::string_view entry) {
  const std::string_view name = entry.substr(0, entry.find('='));
  if (std::find(kOuterLauncherVariables.begin(), kOuterLauncherVariables.end(), name) != kOuterLauncherVariables.end()) {
    return true;
  }
  return std::any_of(std::begin(kSetByLauncher), std::end(kSetByLauncher),
                     [&](const char* own) { return name == own; });
}

}  // namespace

std::vector<std::string> rank_environment(const std::vector<std::string>& parent, const RankPlacement& placement) {
  BRAID_CHECK_ARG(placement.world_size >= 1 && placement.rank >= 0 && placement.rank < placement.world_size,
                  "braid launch: rank {} is outside a job of {} ranks", placement.rank, placement.world_size);
  BRAID_CHECK_ARG(!placement.master_addr.empty(), "braid launch: rank {} has no master address", placement.rank);
  BRAID_CHECK_ARG(placement.master_port > 0 && placement.master_port < 65536,
                  "braid launch: master port {} is out of range (1..65535)", placement.master_port);
  std::vector<std::string> env;
  env.reserve(parent.size() + std::size(kSetByLauncher));
  for (const std::string& entry : parent) {
    if (!removed(entry)) env.push_back(entry);
  }
  const std::string rank = std::to_string(placement.rank);
  const std::string size = std::to_string(placement.world_size);
  env.push_back("RANK=" + rank);
  env.push_back("WORLD_SIZE=" + size);
  env.push_back("LOCAL_RANK=" + rank);
  env.push_back("LOCAL_WORLD_SIZE=" + size);
  env.push_back("MASTER_ADDR=" + placement.master_addr);
  env.push_back("MASTER_PORT=" + std::to_string(placement.master_port));
  BRAID_CHECK_ARG(!placement.job_secret.empty(), "braid launch: rank {} has no job secret", placement.rank);
  env.push_back("BRAID_JOB_SECRET=" + placement.job_secret);
  env.push_back("BRAID_RESTART_COUNT=" + std::to_string(placement.restart_count));
  return env;
}

}  // namespace braid::runtime::launcher
