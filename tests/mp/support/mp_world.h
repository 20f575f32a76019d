// The job every rank of a multi-process test run belongs to: which backend the suite tests, how the
// process was launched, its rank and size, and the store every rank shares.
//
// Launch detection (mp_main.cc calls init_world() once before Catch2 runs):
//   * under mpirun (OMPI_COMM_WORLD_RANK set): the store comes from the MPI bootstrap
//     (collectives/mpi/mpi_bootstrap.h), which also initialises MPI for the mpi backend;
//   * env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, as tests/mp/launch_env.py sets them): rank 0
//     hosts a TCPStore (store::rendezvous). Only gloo runs this way; mpi needs mpirun;
//   * neither: a single process (size 1) with an in-process HashStore, handy for debugging a test.
// The backend is BRAID_TEST_BACKEND (gloo, mpi or nccl; default gloo). nccl needs a CUDA device per rank;
// without one the run is skipped (world().skip_reason says why).
#pragma once

#include <memory>
#include <string>

#include "store/store.h"

namespace braid::mp {

struct World {
  std::string backend;   // "gloo", "mpi", "nccl"
  std::string launcher;  // "mpi", "env" or "none"
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  std::shared_ptr<store::Store> store;  // shared by every rank; tests take prefixes of it
  std::string skip_reason;              // non-empty: this backend cannot run here, and the run is skipped
};

// Detects the launch and connects the store. Throws (naming the variable or the backend) when the
// combination cannot work, e.g. backend mpi under env://.
void init_world();
// Releases the store (and lets the MPI bootstrap finalize) after the tests.
void shutdown_world();
const World& world();

}  // namespace braid::mp
