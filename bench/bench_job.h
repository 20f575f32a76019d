// The bootstrap shared by the two-process benchmarks (`braid bench rpc`, `braid bench dist-autograd`):
// the job's store, rank and size. Under mpirun the store comes from collectives/mpi's bootstrap (MPI
// itself); otherwise from store::rendezvous (init_method, env:// by default).
#pragma once

#include <memory>
#include <string>

namespace braid::store {
class Store;
}  // namespace braid::store

namespace braid::bench {

struct BenchJob {
  std::shared_ptr<store::Store> store;
  int rank = 0;
  int size = 1;
  std::string launcher;  // "mpi", "env", ..., or the init_method's scheme
};

// Joins the job of `command` ("rpc", "dist-autograd": named in the errors) and sets the log identity.
// InvalidArgument when no launcher and no init_method say how to meet, or when the job does not have
// exactly 2 processes (`roles` says what each does, for the message).
BenchJob join_two_process_bench(const std::string& command, const std::string& roles, const std::string& init_method,
                                int timeout_s);

// "#   worker<rank>: pid <pid> on <host>", published under `key_prefix`/<rank> in the job's store and read
// back for both workers by rank 0 (for the preamble of the table).
void publish_bench_worker(const BenchJob& job, const std::string& key_prefix);
std::string read_bench_workers(const BenchJob& job, const std::string& key_prefix);

}  // namespace braid::bench
