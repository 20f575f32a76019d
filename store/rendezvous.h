// How a process finds its rank, its world and the shared store.
//
// detect_launch() reads what the launcher put in the environment: Open MPI (OMPI_COMM_WORLD_RANK/SIZE/
// LOCAL_RANK/LOCAL_SIZE), Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, first host of
// SLURM_JOB_NODELIST) or torchrun-style variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).
//
// rendezvous() turns an init-method URL into a connected store:
//   env://                 MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE (rank 0 hosts a TCPStore)
//   tcp://host:port        rank 0 hosts a TCPStore on host:port
//   file:///path           a FileStore at /path
// Explicit rank/world_size arguments (>= 0) win over the environment; `?rank=R&world_size=W` query
// parameters are accepted too. Missing or malformed variables give InvalidArgument naming the variable.
#pragma once

#include <memory>
#include <string>

#include "store/store.h"

namespace braid::store {

struct LaunchInfo {
  std::string launcher = "none";  // "mpi", "slurm", "env" or "none"
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;
  int local_world_size = -1;
  std::string master_addr;  // "" when the launcher does not say
  int master_port = -1;
};

LaunchInfo detect_launch();

// "node[01-04,07],gpu5" -> "node01"; "host1,host2" -> "host1". Throws InvalidArgument on malformed input.
std::string first_host_of_nodelist(const std::string& nodelist);

struct Rendezvous {
  std::shared_ptr<Store> store;
  int rank = -1;
  int world_size = -1;
};

Rendezvous rendezvous(const std::string& init_method, int rank = -1, int world_size = -1,
                      Millis timeout = kDefaultStoreTimeout);

}  // namespace braid::store
