// A Store for jobs started by mpirun, made with MPI itself: rank 0 of MPI_COMM_WORLD hosts a TCPStore on a
// free port and broadcasts where it listens; every other rank connects to it. Process groups use it for the
// missing-ranks report, monitored_barrier and BRAID_DEBUG=DETAIL; the gloo and nccl engines bootstrap
// through it; tests and the runtime call it when they detect mpirun.
//
// Collective over MPI_COMM_WORLD (every rank must call it; it initialises MPI through MpiRuntime). Ranks
// on rank 0's host connect over loopback; others use rank 0's host name, and the server listens on every
// interface.
#pragma once

#include <memory>

#include "base/deadline.h"
#include "store/store.h"

namespace braid::collectives::mpi {

// `timeout` bounds connecting and is the store's default timeout for blocking calls.
std::shared_ptr<store::Store> mpi_bootstrap_store(Millis timeout);

}  // namespace braid::collectives::mpi
