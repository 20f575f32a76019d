#include "runtime/launch_env.h"

#include "base/logging.h"
#include "store/rendezvous.h"

namespace braid::runtime {

LaunchEnv detect_launch_env() {
  // One reading of the launcher variables for the whole project: the store's (it also serves rendezvous).
  const store::LaunchInfo info = store::detect_launch();
  if (info.launcher == "none") return {};
  const Launcher launcher = info.launcher == "mpi"     ? Launcher::OpenMpi
                            : info.launcher == "slurm" ? Launcher::Slurm
                                                       : Launcher::Env;
  return LaunchEnv{launcher, info.rank, info.world_size};
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
