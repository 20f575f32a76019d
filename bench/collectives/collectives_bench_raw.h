// The raw-engine side of `braid bench collectives`: the same collective on the same buffers, called
// directly on the library under a braid backend, with none of braid's ProcessGroup in between (no
// queue, lane thread, Work, staging or checks). What braid adds over these calls is its overhead.
//
//   mpi   MPI_Allreduce, MPI_Allgather, MPI_Bcast, MPI_Reduce_scatter_block, MPI_Alltoall (blocking) on
//         a dup of MPI_COMM_WORLD; MPI has no half-precision reductions, so float16/bfloat16 reductions
//         have no raw reference.
//   gloo  gloo::allreduce, gloo::allgather, gloo::broadcast, gloo::alltoall (gloo's new-style
//         collectives, default algorithms) and gloo::ReduceScatterHalvingDoubling on one gloo context of
//         its own, connected over the job's store; gloo reduces float16 natively but not bfloat16.
//   nccl  ncclAllReduce, ncclAllGather, ncclBroadcast, ncclReduceScatter and an ncclSend/ncclRecv
//         alltoall on a communicator and stream of its own, synchronised after each op (braid's wait()
//         also returns only once the GPU is done).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "bench/collectives/collectives_bench.h"
#include "store/store.h"
#include "tensor/tensor.h"

namespace braid::bench {

// One size's buffers, shared by the braid and raw sides. allreduce and broadcast work in place on `input`
// (`output` is the same tensor); allgather gathers `input` (n elements) into `output` (ranks * n);
// reduce_scatter reduces `input` (ranks * n) into `output` (n); alltoall sends block r of `input` to rank r.
struct BenchBuffers {
  Tensor input;
  Tensor output;
};

class RawCollective {
 public:
  virtual ~RawCollective() = default;
  // The call this engine makes for `op`, e.g. "MPI_Allreduce".
  virtual std::string call_name(BenchOp op) const = 0;
  // Whether the engine has the op for this dtype (MPI reduces no float16).
  virtual bool supports(BenchOp op, DType dtype) const = 0;
  // Called once per size before the first run() (gloo builds its reduce-scatter algorithm here).
  virtual void prepare(BenchOp op, const BenchBuffers& buffers) = 0;
  // One op, returning when it is complete on this rank.
  virtual void run(BenchOp op, const BenchBuffers& buffers) = 0;
  virtual void barrier() = 0;
};

// Every rank of the job must call the factory (they connect). `timeout` bounds connecting and each op.
// `nonblocking`: MPI_Iallreduce & co. + MPI_Wait instead (the calls braid's mpi engine makes, so that
// the two ratios separate the cost of libnbc's algorithms from the cost of braid itself).
std::unique_ptr<RawCollective> make_raw_mpi(bool nonblocking);
// `device`: the network interface of gloo's TCP device (the braid group's first device); empty: the one
// a braid gloo group without devices takes (collectives/gloo/gloo_devices.h default_interface).
std::unique_ptr<RawCollective> make_raw_gloo(const std::shared_ptr<store::Store>& store, int rank, int size,
                                             std::chrono::milliseconds timeout, const std::string& device = "");
// `device`: the CUDA device of this rank (the one braid's nccl group uses).
std::unique_ptr<RawCollective> make_raw_nccl(const std::shared_ptr<store::Store>& store, int rank, int size,
                                             int device, std::chrono::milliseconds timeout);

}  // namespace braid::bench
