#include "runtime/launch_env.h"

#include "base/check.h"
#include "base/env.h"
#include "base/logging.h"
#include "store/rendezvous.h"

namespace braid::runtime {

LaunchEnv detect_launch_env() {
  // One reading of the launcher variables for the whole project: the store's (it also serves rendezvous).
  const store::LaunchInfo info = store::detect_launch();
  LaunchEnv out;
  for (const char* name : {"BRAID_RESTART_COUNT", "SLURM_RESTART_COUNT"}) {
    const std::optional<std::string> text = env::get(name);
    if (!text || text->empty()) continue;
    const int64_t n = env::parse_int(*text, name);
    BRAID_CHECK_ARG(n >= 0 && n <= 1'000'000, "{}={} is not a restart count (0 or more)", name, *text);
    out.restart_count = static_cast<int>(n);
    break;
  }
  if (info.launcher == "none") return out;
  out.launcher = info.launcher == "mpi"     ? Launcher::OpenMpi
                 : info.launcher == "slurm" ? Launcher::Slurm
                                            : Launcher::Env;
  out.rank = info.rank;
  out.world_size = info.world_size;
  out.local_rank = info.local_rank;
  return out;
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
