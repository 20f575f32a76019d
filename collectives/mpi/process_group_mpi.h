// ProcessGroupMPI: braid's Open MPI engine (backend "mpi"). The base (QueuedProcessGroup) does the checks,
// ordering, staging and errors; this class only moves flat buffers with MPI.
//
// Communicators: one per group, MPI_COMM_WORLD's dup for the world (BackendOptions::global_ranks empty) or
// MPI_Comm_create_group over the members' world ranks (collective over the members only, so a group can
// be made by its members alone), then one dup per lane and one for send/recv. Every communicator returns
// errors (MPI_ERRORS_RETURN) instead of aborting the job.
//
// Collectives are nonblocking MPI (MPI_Iallreduce, ...) tested until ctx.deadline with a backoff, so a
// rank whose peers never come fails with TimeoutError on time and keeps its core mostly free while it
// waits. Why not the blocking (coll/tuned) calls, and what that costs, is measured in README.md.
// Allreduces larger than BackendOptions::mpi_allreduce_chunk_bytes (default from
// BRAID_MPI_ALLREDUCE_CHUNK_BYTES, else 16 MiB) run as consecutive MPI_Iallreduce calls on chunks of the
// buffer, inside the one op. Point-to-point goes through MpiP2p (its own communicator and progress thread).
//
// Lifetime: the destructor drains the lanes (base shutdown()), stops the progress thread, then frees the
// communicators, unless MPI was already finalised (by the application), in which case no MPI call is made.
//
// Thread-safety: as ProcessGroup.
#pragma once

#include <mpi.h>

#include <any>
#include <memory>
#include <string>
#include <vector>

#include "collectives/backends/backends.h"
#include "collectives/queued_process_group.h"

namespace braid::collectives::mpi {

class MpiRuntime;
class MpiP2p;

class ProcessGroupMPI final : public QueuedProcessGroup {
 public:
  explicit ProcessGroupMPI(const BackendOptions& options);
  ~ProcessGroupMPI() override;

  std::string backend_name() const override { return "mpi"; }
  // The group's communicator (not a lane's): for raw-MPI comparisons in benchmarks. Owned by the group.
  MPI_Comm communicator() const { return comms_.group; }

 protected:
  void run_broadcast(Tensor& buffer, int root, const OpContext& ctx) override;
  void run_allreduce(Tensor& buffer, EngineOp op, const OpContext& ctx) override;
  void run_reduce(Tensor& buffer, EngineOp op, int root, const OpContext& ctx) override;
  void run_allgather(const Tensor& input, Tensor& output, const OpContext& ctx) override;
  void run_gather(const Tensor& input, Tensor& output, int root, const OpContext& ctx) override;
  void run_scatter(const Tensor& input, Tensor& output, int root, const OpContext& ctx) override;
  void run_reduce_scatter(const Tensor& input, Tensor& output, EngineOp op, const OpContext& ctx) override;
  void run_alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                    const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& recv_counts,
                    const std::vector<int64_t>& recv_offsets, const OpContext& ctx) override;
  void run_barrier(const OpContext& ctx) override;
  void post_send(const Tensor& buffer, int dst, int tag, std::shared_ptr<Work> work) override;
  void post_recv(Tensor& buffer, int src, int tag, std::shared_ptr<Work> work) override;
  bool engine_reduces(DType dtype) const override;

 private:
  // The group's communicators; frees them on destruction unless MPI is finalised.
  struct Communicators {
    MPI_Comm group = MPI_COMM_NULL;
    MPI_Comm p2p = MPI_COMM_NULL;
    std::vector<MPI_Comm> lanes;
    Communicators() = default;
    Communicators(const Communicators&) = delete;
    Communicators& operator=(const Communicators&) = delete;
    ~Communicators();
  };

  void create_communicators(const BackendOptions& options);
  MPI_Comm lane_comm(const OpContext& ctx) const;
  MPI_Op reduce_op(EngineOp op, DType dtype) const;
  // Starts a nonblocking operation with `start(&request)` (moving about `bytes` per rank, which sizes the
  // busy part of the wait) and tests it until ctx.deadline. On timeout the
  // request (which MPI cannot cancel) and `keep` (everything MPI may still touch) go to the progress
  // thread and TimeoutError is thrown.
  template <class Start>
  void run_nonblocking(const char* call, const OpContext& ctx, size_t bytes, std::any keep, Start&& start);
  // Posts point-to-point messages on the lane's communicator with `post(requests)` (which may also work
  // locally while they move) and tests them all until ctx.deadline; on failure or timeout every request
  // goes to the progress thread with `keep`, and the timeout throws TimeoutError naming `op`.
  template <class Post>
  void run_exchange(const char* op, const OpContext& ctx, size_t bytes, std::any keep, Post&& post);
  // allgather and reduce_scatter as one such exchange between every pair of ranks (groups of up to
  // kDirectExchangeMaxRanks ranks; see the .cc for why).
  void run_direct_allgather(const Tensor& input, Tensor& output, bool in_place, const OpContext& ctx);
  void run_direct_allreduce(Tensor& buffer, EngineOp op, const OpContext& ctx);
  void run_direct_reduce_scatter(const Tensor& input, Tensor& output, EngineOp op, const OpContext& ctx);
  void run_direct_alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                           const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& recv_counts,
                           const std::vector<int64_t>& recv_offsets, const OpContext& ctx);

  std::shared_ptr<MpiRuntime> runtime_;  // first: outlives the communicators
  Communicators comms_;
  std::unique_ptr<MpiP2p> p2p_;
  // Allreduces larger than this run in chunks of at most this many bytes (0: never).
  int64_t allreduce_chunk_bytes_ = 0;
};

}  // namespace braid::collectives::mpi

namespace braid::collectives {

// The "mpi" backend of create_process_group (collectives/backends/backends.h).
std::shared_ptr<ProcessGroup> create_mpi_process_group(const BackendOptions& options);

}  // namespace braid::collectives
