#include "runtime/launch_env.h"

#include <cstdint>
#include <optional>

#include "base/check.h"
#include "base/env.h"
#include "base/logging.h"

namespace braid::runtime {
namespace {

struct Source {
  Launcher launcher;
  const char* rank_var;
  const char* size_var;
};

constexpr Source kSources[] = {
    {Launcher::OpenMpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {Launcher::Slurm, "SLURM_PROCID", "SLURM_NTASKS"},
    {Launcher::Env, "RANK", "WORLD_SIZE"},
};

std::optional<LaunchEnv> read_source(const Source& s) {
  const auto rank_text = env::get(s.rank_var);
  const auto size_text = env::get(s.size_var);
  if (!rank_text || !size_text) return std::nullopt;
  const int64_t rank = env::parse_int(*rank_text, s.rank_var);
  const int64_t size = env::parse_int(*size_text, s.size_var);
  BRAID_CHECK_ARG(size >= 1 && size <= INT32_MAX, "{}={}: the job size must be at least 1", s.size_var, size);
  BRAID_CHECK_ARG(rank >= 0 && rank < size, "{}={} is outside [0, {}={})", s.rank_var, rank, s.size_var, size);
  return LaunchEnv{s.launcher, static_cast<int>(rank), static_cast<int>(size)};
}

}  // namespace

LaunchEnv detect_launch_env() {
  for (const Source& s : kSources) {
    if (auto found = read_source(s)) return *found;
  }
  return {};
}

std::string_view launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::None: return "none";
    case Launcher::OpenMpi: return "mpirun";
    case Launcher::Slurm: return "slurm";
    case Launcher::Env: return "env";
  }
  return "unknown";
}

void stamp_log_identity(const LaunchEnv& env, std::string_view role) {
  if (env.launcher == Launcher::None) return;
  logging::set_identity(env.rank, env.world_size, role);
}

}  // namespace braid::runtime
