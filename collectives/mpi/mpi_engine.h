// MpiEngine: braid's Open MPI engine (backend "mpi", core/engine.h). The group around it
// (queue/engine_process_group.h) does the checks, ordering, packing and errors; this class only moves flat
// buffers with MPI.
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
// Lifetime: the group drains its lanes before it destroys the engine; the destructor stops the progress
// thread, then frees the communicators, unless MPI was already finalised (by the application), in which
// case no MPI call is made.
//
// Thread-safety: as Engine.
#pragma once

#include <mpi.h>

#include <any>
#include <memory>
#include <string>
#include <vector>

#include "collectives/core/backend_options.h"
#include "collectives/core/engine.h"

namespace braid::collectives::mpi {

class DirectExchange;
class MpiRuntime;
class MpiP2p;

class MpiEngine final : public Engine {
 public:
  explicit MpiEngine(const BackendOptions& options);
  ~MpiEngine() override;

  std::string_view name() const override { return "mpi"; }
  int lanes() const override;
  // The group's communicator (not a lane's): for raw-MPI comparisons in benchmarks. Owned by the group.
  MPI_Comm communicator() const { return comms_.group; }

  bool broadcast(Tensor& buffer, int root, const OpContext& ctx) override;
  bool allreduce(Tensor& buffer, EngineOp op, const OpContext& ctx) override;
  bool reduce(Tensor& buffer, EngineOp op, int root, const OpContext& ctx) override;
  bool allgather(const Tensor& input, Tensor& output, const OpContext& ctx) override;
  bool gather(const Tensor& input, Tensor& output, int root, const OpContext& ctx) override;
  bool scatter(const Tensor& input, Tensor& output, int root, const OpContext& ctx) override;
  bool reduce_scatter(const Tensor& input, Tensor& output, EngineOp op, const OpContext& ctx) override;
  bool alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& recv_counts,
                const std::vector<int64_t>& recv_offsets, const OpContext& ctx) override;
  bool barrier(const OpContext& ctx) override;
  void post_send(const Tensor& buffer, int dst, int tag, const Deadline& deadline,
                 std::shared_ptr<Work> work) override;
  void post_recv(Tensor& buffer, int src, int tag, const Deadline& deadline, std::shared_ptr<Work> work) override;
  bool reduces(DType dtype) const override;

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
  int rank() const { return shape_.rank; }
  int size() const { return shape_.size; }

  const GroupShape shape_;
  std::shared_ptr<MpiRuntime> runtime_;  // first: outlives the communicators
  Communicators comms_;
  std::unique_ptr<MpiP2p> p2p_;
  std::unique_ptr<DirectExchange> direct_;  // after p2p_, which it uses
  // Allreduces larger than this run in chunks of at most this many bytes (0: never).
  int64_t allreduce_chunk_bytes_ = 0;
};

}  // namespace braid::collectives::mpi

namespace braid::collectives {

// The engine of the "mpi" backend (composed into a group by collectives/registry/engine_factory.h).
std::unique_ptr<Engine> make_mpi_engine(const BackendOptions& options);

}  // namespace braid::collectives
