// Raw MPI reference of `braid bench collectives` (see collectives_bench_raw.h).
#include <mpi.h>

#include <memory>

#include "base/check.h"
#include "bench/collectives/collectives_bench_raw.h"
#include "collectives/mpi/mpi_runtime.h"
#include "collectives/mpi/mpi_types.h"

namespace braid::bench {
namespace {

namespace cm = collectives::mpi;

class RawMpi final : public RawCollective {
 public:
  explicit RawMpi(bool nonblocking) : runtime_(cm::MpiRuntime::acquire()), nonblocking_(nonblocking) {
    cm::check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup", "bench collectives: raw MPI");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_size(comm_, &size_);
  }
  ~RawMpi() override {
    if (!cm::MpiRuntime::finalized()) MPI_Comm_free(&comm_);
  }
  RawMpi(const RawMpi&) = delete;
  RawMpi& operator=(const RawMpi&) = delete;

  std::string call_name(BenchOp op) const override {
    static constexpr const char* kBlocking[] = {"MPI_Allreduce", "MPI_Allgather", "MPI_Bcast",
                                                "MPI_Reduce_scatter_block", "MPI_Alltoall"};
    static constexpr const char* kNonblocking[] = {"MPI_Iallreduce+MPI_Wait", "MPI_Iallgather+MPI_Wait",
                                                   "MPI_Ibcast+MPI_Wait", "MPI_Ireduce_scatter_block+MPI_Wait",
                                                   "MPI_Ialltoall+MPI_Wait"};
    return (nonblocking_ ? kNonblocking : kBlocking)[static_cast<int>(op)];
  }

  bool supports(BenchOp op, DType dtype) const override {
    const bool reduces = op == BenchOp::Allreduce || op == BenchOp::ReduceScatter;
    return !reduces || cm::mpi_reduces(dtype);
  }

  void prepare(BenchOp, const BenchBuffers&) override {}

  void run(BenchOp op, const BenchBuffers& b) override {
    const DType dtype = b.input.dtype();
    const char* what = "bench collectives: raw MPI";
    void* in = b.input.data_ptr();
    void* out = b.output.data_ptr();
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Request* r = nonblocking_ ? &request : nullptr;
    int rc = MPI_SUCCESS;
    switch (op) {
      case BenchOp::Allreduce: {
        const int n = cm::mpi_count(b.input.numel(), what);
        const MPI_Datatype t = cm::mpi_reduce_type(dtype);
        rc = r ? MPI_Iallreduce(MPI_IN_PLACE, in, n, t, MPI_SUM, comm_, r)
               : MPI_Allreduce(MPI_IN_PLACE, in, n, t, MPI_SUM, comm_);
        break;
      }
      case BenchOp::Broadcast: {
        const int n = cm::mpi_count(b.input.numel(), what);
        const MPI_Datatype t = cm::mpi_move_type(dtype);
        rc = r ? MPI_Ibcast(in, n, t, 0, comm_, r) : MPI_Bcast(in, n, t, 0, comm_);
        break;
      }
      case BenchOp::Allgather: {
        const int n = cm::mpi_count(b.input.numel(), what);
        const MPI_Datatype t = cm::mpi_move_type(dtype);
        rc = r ? MPI_Iallgather(in, n, t, out, n, t, comm_, r) : MPI_Allgather(in, n, t, out, n, t, comm_);
        break;
      }
      case BenchOp::ReduceScatter: {
        const int n = cm::mpi_count(b.output.numel(), what);
        const MPI_Datatype t = cm::mpi_reduce_type(dtype);
        rc = r ? MPI_Ireduce_scatter_block(in, out, n, t, MPI_SUM, comm_, r)
               : MPI_Reduce_scatter_block(in, out, n, t, MPI_SUM, comm_);
        break;
      }
      case BenchOp::Alltoall: {
        const int n = cm::mpi_count(b.input.numel() / size_, what);
        const MPI_Datatype t = cm::mpi_move_type(dtype);
        rc = r ? MPI_Ialltoall(in, n, t, out, n, t, comm_, r) : MPI_Alltoall(in, n, t, out, n, t, comm_);
        break;
      }
    }
    cm::check_mpi(rc, call_name(op).c_str(), what);
    if (r) cm::check_mpi(MPI_Wait(r, MPI_STATUS_IGNORE), "MPI_Wait", what);
  }

  void barrier() override { cm::check_mpi(MPI_Barrier(comm_), "MPI_Barrier", "bench collectives: raw MPI"); }

 private:
  std::shared_ptr<cm::MpiRuntime> runtime_;  // first: outlives the communicator
  bool nonblocking_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int size_ = 1;
};

}  // namespace

std::unique_ptr<RawCollective> make_raw_mpi(bool nonblocking) { return std::make_unique<RawMpi>(nonblocking); }

}  // namespace braid::bench
