// DirectExchange: the MPI engine's collectives for small groups that run as one exchange of blocks between
// every pair of ranks, all posted at once on the lane's communicator (MPI_Isend/MPI_Irecv on one tag that
// Open MPI's own collectives never use), instead of libnbc's rounds. Reductions then run in rank order with
// MPI_Reduce_local, so every rank computes the same bits. Each method documents when the engine uses it
// and what it measured against Open MPI's collectives.
//
// On failure or timeout the posted requests go to the p2p progress thread with the buffers they touch
// (MPI cannot cancel them), and the op throws.
//
// Thread-safety: one op per lane at a time, as the engine's primitives.
#pragma once

#include <mpi.h>

#include <any>
#include <cstdint>
#include <vector>

#include "collectives/core/engine.h"

namespace braid::collectives::mpi {

class MpiP2p;

class DirectExchange {
 public:
  // `p2p` adopts the requests of a failed exchange; it must outlive this object.
  DirectExchange(int rank, int size, MpiP2p& p2p);

  void allreduce(Tensor& buffer, MPI_Op op, MPI_Comm comm, const OpContext& ctx);
  void allgather(const Tensor& input, Tensor& output, bool in_place, MPI_Comm comm, const OpContext& ctx);
  void reduce_scatter(const Tensor& input, Tensor& output, MPI_Op op, MPI_Comm comm, const OpContext& ctx);
  void alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& recv_counts,
                const std::vector<int64_t>& recv_offsets, MPI_Comm comm, const OpContext& ctx);

 private:
  // Posts the messages with `post(requests)` (which may also work locally while they move) and tests them
  // all until ctx.deadline; on failure or timeout every request goes to the progress thread with `keep`,
  // and the timeout throws TimeoutError naming `op`.
  template <class Post>
  void run_exchange(const char* op, const OpContext& ctx, size_t bytes, std::any keep, Post&& post);

  const int rank_;
  const int size_;
  MpiP2p& p2p_;
};

}  // namespace braid::collectives::mpi
