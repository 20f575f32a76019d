#include "bench/bench_job.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>

#include "base/check.h"
#include "base/logging.h"
#include "collectives/mpi/mpi_bootstrap.h"
#include "store/rendezvous.h"

namespace braid::bench {

BenchJob join_two_process_bench(const std::string& command, const std::string& roles, const std::string& init_method,
                                int timeout_s) {
  const std::chrono::milliseconds timeout = std::chrono::seconds(timeout_s);
  const store::LaunchInfo launch = store::detect_launch();
  BenchJob job;
  job.launcher = launch.launcher;
  if (init_method.empty() && launch.launcher == "mpi") {
    job.store = collectives::mpi::mpi_bootstrap_store(timeout);
    job.rank = launch.rank;
    job.size = launch.world_size;
  } else {
    BRAID_CHECK_ARG(!init_method.empty() || launch.launcher != "none",
                    "bench {0}: needs 2 processes: run it under a launcher (mpirun -np 2 braid bench {0}) or as an "
                    "env:// job (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or give --init-method",
                    command);
    const auto rv = store::rendezvous(init_method.empty() ? "env://" : init_method, -1, -1, timeout);
    job.store = rv.store;
    job.rank = rv.rank;
    job.size = rv.world_size;
    if (!init_method.empty()) job.launcher = init_method.substr(0, init_method.find(':'));
  }
  BRAID_CHECK_ARG(job.size == 2, "bench {}: needs exactly 2 processes ({}), got {}", command, roles, job.size);
  logging::set_identity(job.rank, job.size, "bench");
  return job;
}

void publish_bench_worker(const BenchJob& job, const std::string& key_prefix) {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  job.store->set(fmt::format("{}/{}", key_prefix, job.rank),
                 fmt::format("#   worker{}: pid {} on {}", job.rank, ::getpid(), host));
}

std::string read_bench_workers(const BenchJob& job, const std::string& key_prefix) {
  std::string out;
  for (int r = 0; r < job.size; ++r) out += job.store->get_string(fmt::format("{}/{}", key_prefix, r)) + "\n";
  return out;
}

}  // namespace braid::bench
