// The environment of one rank started by `braid launch`: the launcher's own environment, minus what an
// outer launcher put there for the launcher process itself, plus the torchrun-style variables that
// braid's env:// rendezvous reads (store/rendezvous.h): RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT, the job secret (BRAID_JOB_SECRET), and how many times the job has been
// restarted (BRAID_RESTART_COUNT, as torchrun's TORCHELASTIC_RESTART_COUNT: braid run resumes from the
// latest checkpoint when it is above 0).
#pragma once

#include <string>
#include <vector>

namespace braid::runtime::launcher {

struct RankPlacement {
  int rank = 0;
  int world_size = 1;
  std::string master_addr;
  int master_port = 0;
  // The job secret's text (security::JobSecret::text()), handed over as BRAID_JOB_SECRET: through the
  // environment, which only the rank's own user can read, never on a command line.
  std::string job_secret;
  int restart_count = 0;
};

// Variables removed from every rank's environment. store::detect_launch() takes the first launcher whose
// rank variable it finds, Open MPI's and Slurm's before RANK: `braid launch` run by a Slurm batch script
// (SLURM_PROCID=0) or by mpirun would otherwise give every rank the launcher's own rank.
extern const std::vector<std::string> kOuterLauncherVariables;

// parent: "NAME=VALUE" entries (environ). Returns the rank's entries: parent's order, with the launcher
// variables above and any earlier RANK, WORLD_SIZE, … removed, and the new ones appended. Everything
// runs on one node, so LOCAL_RANK = RANK and LOCAL_WORLD_SIZE = WORLD_SIZE.
std::vector<std::string> rank_environment(const std::vector<std::string>& parent, const RankPlacement& placement);

}  // namespace braid::runtime::launcher
