// Where this process sits in a job, as told by the launcher's environment: Open MPI's mpirun
// (OMPI_COMM_WORLD_RANK/SIZE), Slurm's srun (SLURM_PROCID/SLURM_NTASKS) or a generic launcher
// (RANK/WORLD_SIZE). Only a first step: the runtime's bootstrap builds the full rendezvous on top of it.
#pragma once

#include <string>
#include <string_view>

namespace braid::runtime {

enum class Launcher { None, OpenMpi, Slurm, Env };

struct LaunchEnv {
  Launcher launcher = Launcher::None;
  int rank = 0;
  int world_size = 1;
  // This process's index among the job's processes on its host (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
  // SLURM_LOCALID); -1 when the launcher does not say. A CUDA rank takes the device of this index.
  int local_rank = -1;
  // How many times this job has been started again after a failure: BRAID_RESTART_COUNT (braid launch
  // --max-restarts), else SLURM_RESTART_COUNT (a requeued Slurm job), else 0. Above 0, braid run resumes
  // from the latest complete checkpoint.
  int restart_count = 0;
};

// Reads the launchers' variables through store::detect_launch(), first match wins in the order above:
// mpirun inside a Slurm allocation sets both, and then Open MPI's view is the one that describes this
// process. Throws InvalidArgument naming the variable when one is missing or not an integer, or when the
// rank is outside [0, size), or when a restart count is not a non-negative integer.
LaunchEnv detect_launch_env();

// "none", "mpirun", "slurm", "env".
std::string_view launcher_name(Launcher launcher);

// Stamps every log line with "rank R/W role" when a launcher was detected; a lone process keeps the
// default "pid N" stamp.
void stamp_log_identity(const LaunchEnv& env, std::string_view role);

}  // namespace braid::runtime
