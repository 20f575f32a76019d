// Raw NCCL reference of `braid bench collectives` (see collectives_bench_raw.h): a communicator and a
// stream of this file's own, each op synchronised on the host before run() returns, as braid's Work::wait
// returns only after the op's CUDA event completed. Built when NCCL is (BRAID_HAVE_NCCL).
#include "base/config.h"
#include "bench/collectives/collectives_bench_raw.h"

#if BRAID_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#endif

#include "base/check.h"

namespace braid::bench {

#if BRAID_HAVE_NCCL
namespace {

void check_nccl(ncclResult_t rc, const char* call) {
  if (rc != ncclSuccess) BRAID_THROW(CommError, "bench collectives: raw {} failed: {}", call, ncclGetErrorString(rc));
}

void check_cuda(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess) BRAID_THROW(CommError, "bench collectives: raw {} failed: {}", call, cudaGetErrorString(rc));
}

std::optional<ncclDataType_t> nccl_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::UInt8: return ncclUint8;
    case DType::Int8: return ncclInt8;
    case DType::Bool: return std::nullopt;
  }
  return std::nullopt;
}

class RawNccl final : public RawCollective {
 public:
  RawNccl(const std::shared_ptr<store::Store>& store, int rank, int size, int device, std::chrono::milliseconds timeout)
      : device_(device), size_(size) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    ncclUniqueId id;
    const std::string key = "bench/raw-nccl/id";
    if (rank == 0) {
      check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
      store->set(key, store::Bytes(reinterpret_cast<const uint8_t*>(&id), reinterpret_cast<const uint8_t*>(&id) + sizeof(id)));
    } else {
      const store::Bytes bytes = store->get(key, timeout);
      BRAID_CHECK_EQ(bytes.size(), sizeof(id), "bench collectives: raw nccl: malformed unique id in the store");
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    check_nccl(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check_cuda(cudaMalloc(&barrier_word_, sizeof(float)), "cudaMalloc");
  }
  ~RawNccl() override {
    cudaSetDevice(device_);
    if (barrier_word_) cudaFree(barrier_word_);
    if (stream_) cudaStreamDestroy(stream_);
    if (comm_) ncclCommDestroy(comm_);
  }
  RawNccl(const RawNccl&) = delete;
  RawNccl& operator=(const RawNccl&) = delete;

  std::string call_name(BenchOp op) const override {
    static constexpr const char* kNames[] = {"ncclAllReduce", "ncclAllGather", "ncclBroadcast", "ncclReduceScatter",
                                             "ncclSend/ncclRecv"};
    return kNames[static_cast<int>(op)];
  }

  bool supports(BenchOp, DType dtype) const override { return nccl_type(dtype).has_value(); }
  void prepare(BenchOp, const BenchBuffers&) override {}

  void run(BenchOp op, const BenchBuffers& b) override {
    const ncclDataType_t t = *nccl_type(b.input.dtype());
    void* in = b.input.data_ptr();
    void* out = b.output.data_ptr();
    const auto n_in = static_cast<size_t>(b.input.numel());
    const auto n_out = static_cast<size_t>(b.output.numel());
    switch (op) {
      case BenchOp::Allreduce:
        check_nccl(ncclAllReduce(in, in, n_in, t, ncclSum, comm_, stream_), "ncclAllReduce");
        break;
      case BenchOp::Broadcast:
        check_nccl(ncclBroadcast(in, in, n_in, t, 0, comm_, stream_), "ncclBroadcast");
        break;
      case BenchOp::Allgather:
        check_nccl(ncclAllGather(in, out, n_in, t, comm_, stream_), "ncclAllGather");
        break;
      case BenchOp::ReduceScatter:
        check_nccl(ncclReduceScatter(in, out, n_out, t, ncclSum, comm_, stream_), "ncclReduceScatter");
        break;
      case BenchOp::Alltoall: {
        const size_t block = n_in / static_cast<size_t>(size_);
        const size_t block_bytes = block * b.input.element_size();
        check_nccl(ncclGroupStart(), "ncclGroupStart");
        for (int r = 0; r < size_; ++r) {
          const size_t offset = static_cast<size_t>(r) * block_bytes;
          check_nccl(ncclSend(static_cast<char*>(in) + offset, block, t, r, comm_, stream_), "ncclSend");
          check_nccl(ncclRecv(static_cast<char*>(out) + offset, block, t, r, comm_, stream_), "ncclRecv");
        }
        check_nccl(ncclGroupEnd(), "ncclGroupEnd");
        break;
      }
    }
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  void barrier() override {
    check_nccl(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce");
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

 private:
  int device_;
  int size_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* barrier_word_ = nullptr;
};

}  // namespace

std::unique_ptr<RawCollective> make_raw_nccl(const std::shared_ptr<store::Store>& store, int rank, int size,
                                             int device, std::chrono::milliseconds timeout) {
  return std::make_unique<RawNccl>(store, rank, size, device, timeout);
}

#else

std::unique_ptr<RawCollective> make_raw_nccl(const std::shared_ptr<store::Store>&, int, int, int,
                                             std::chrono::milliseconds) {
  BRAID_THROW(InvalidArgument, "bench collectives: this braid was built without NCCL (CMake option BRAID_WITH_NCCL)");
}

#endif

}  // namespace braid::bench
