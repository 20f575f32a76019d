#include "tests/mp/support/mp_world.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "base/check.h"
#include "base/deadline.h"
#include "base/env.h"
#include "base/logging.h"
#include "collectives/registry/engine_factory.h"
#include "collectives/mpi/mpi_bootstrap.h"
#include "store/hash_store.h"
#include "store/rendezvous.h"
#include "tensor/cuda/device_api.h"

namespace braid::mp {

namespace {

// Long enough for every rank of an oversubscribed job to start (mpirun on 2 cores starts 4 ranks in a
// few seconds); short enough that a rank that never comes fails the run instead of hanging it.
constexpr Millis kConnectTimeout{120'000};

World& mutable_world() {
  static World w;
  return w;
}

std::string nccl_skip_reason(int local_rank) {
  const int n = cuda::device_count();
  if (n == 0) return fmt::format("nccl needs a CUDA device: {}", cuda::unavailable_reason());
  // NCCL refuses two ranks of one communicator on the same GPU.
  if (local_rank >= n) return fmt::format("nccl needs one CUDA device per rank: local rank {} but {} device(s)", local_rank, n);
  return "";
}

}  // namespace

void init_world() {
  World& w = mutable_world();
  w.backend = env::get("BRAID_TEST_BACKEND").value_or("gloo");
  BRAID_CHECK_ARG(collectives::backend_available(w.backend),
                  "BRAID_TEST_BACKEND={}: this build has no such backend (available: {})", w.backend,
                  fmt::join(collectives::available_backends(), ", "));

  const store::LaunchInfo launch = store::detect_launch();
  w.launcher = launch.launcher;
  if (launch.launcher == "mpi") {
    w.rank = launch.rank;
    w.size = launch.world_size;
    w.local_rank = launch.local_rank >= 0 ? launch.local_rank : launch.rank;
    w.store = collectives::mpi::mpi_bootstrap_store(kConnectTimeout);
  } else if (launch.launcher == "env") {
    BRAID_CHECK_ARG(w.backend != "mpi",
                    "BRAID_TEST_BACKEND=mpi needs mpirun (this process was started by an env:// launcher, "
                    "RANK={}); run the mpi suite as `mpirun -np N collectives_mp_tests`", launch.rank);
    w.rank = launch.rank;
    w.size = launch.world_size;
    w.local_rank = launch.local_rank >= 0 ? launch.local_rank : launch.rank;
    w.store = store::rendezvous("env://", w.rank, w.size, kConnectTimeout).store;
  } else {
    BRAID_CHECK_ARG(launch.launcher == "none", "launcher '{}' is not supported by the mp tests (use mpirun or "
                    "tests/mp/launch_env.py)", launch.launcher);
    w.rank = 0;
    w.size = 1;
    w.local_rank = 0;
    w.store = w.backend == "mpi" ? collectives::mpi::mpi_bootstrap_store(kConnectTimeout)
                                 : std::make_shared<store::HashStore>(kConnectTimeout);
  }
  if (w.backend == "nccl") w.skip_reason = nccl_skip_reason(w.local_rank);
  logging::set_identity(w.rank, w.size, "mp-test");
}

void shutdown_world() {
  World& w = mutable_world();
  if (!w.store) return;
  // Rank 0 hosts the store (env:// and the MPI bootstrap): it must not take the server down while another
  // rank still waits on it (e.g. in the last test case's closing barrier). Every rank checks out, and
  // rank 0 leaves only when all have.
  try {
    const std::string key = "mp/checked-out";
    w.store->add(key, 1);
    if (w.rank == 0) {
      const Deadline deadline = Deadline::after(kConnectTimeout);
      while (w.store->add(key, 0) < w.size && !deadline.expired()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: leaving the job: %s\n", w.rank, e.what());
  }
  w.store.reset();
}

const World& world() { return mutable_world(); }

}  // namespace braid::mp
