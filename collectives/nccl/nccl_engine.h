// NcclEngine: the collectives on CUDA tensors over NCCL (core/engine.h). The group around it
// (queue/engine_process_group.h) does the checks, packing, lanes and error stickiness; this engine turns
// each primitive into NCCL calls.
//
// Per lane (one; see below): a communicator of all the group's ranks, created lazily by the first op on
// the lane (group rank 0 publishes the NCCL id under "nccl/lane/<n>/id" in the group's store, the others
// read it within that op's deadline), a non-blocking CUDA stream and two events. An op:
//   1. orders the lane's stream after the legacy default stream, where braid's tensor kernels and copies
//      (and so the staging of this op's buffers) run;
//   2. issues its NCCL calls on the lane's stream (collectives natively; gather, scatter and alltoall as
//      ncclSend/ncclRecv inside ncclGroupStart/End; barrier as an allreduce of one element);
//   3. records an event and polls it with backoff until it completes, checking ncclCommGetAsyncError and
//      the op's deadline. On timeout the op fails with TimeoutError and the watchdog (nccl_watchdog.h)
//      aborts the communicator; the group then marks itself broken.
// The op's thread waits for completion because the group copies results back (and frees the flat buffers)
// right after the primitive returns.
//
// One lane: NCCL kernels of different communicators on one GPU can deadlock when ranks launch them in
// different orders (each waits for peers while holding SMs the other needs), and the lane threads give no
// cross-rank order. Ops queued on the group still overlap with the caller; they run one after another.
//
// send/recv go through NcclP2P (a two-rank communicator and stream per direction between two ranks, a
// completion thread). recv_anysource and the bitwise reduce ops (BAND, BOR, BXOR) are refused at call time: NCCL has
// neither.
//
// Device: BackendOptions.cuda_device, else the launcher's local rank (OMPI/Slurm/torchrun variables),
// else the group rank, modulo the number of visible devices. Tensors must live on that device.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives/core/backend_options.h"
#include "collectives/core/engine.h"
#include "collectives/core/process_group.h"

namespace braid::collectives {

namespace nccl {
class NcclP2P;
class NcclWatchdog;
struct NcclLane;
}  // namespace nccl

class NcclEngine final : public Engine {
 public:
  // Throws InvalidArgument "nccl backend needs a CUDA device: <reason>" without a usable GPU, and when
  // the device index or the options are invalid. Creates no communicator yet.
  explicit NcclEngine(const BackendOptions& options);
  ~NcclEngine() override;

  std::string_view name() const override { return "nccl"; }
  int lanes() const override;
  // The CUDA device this rank's communicators use.
  int cuda_device() const { return device_; }

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

  // NCCL reduces every dtype it moves, float16 and bfloat16 included; bool goes through uint8.
  bool reduces(DType dtype) const override { return dtype != DType::Bool; }
  bool accepts_cuda() const override { return true; }
  bool accepts_cpu() const override { return false; }
  Device device() const override { return Device::cuda(device_); }
  // NCCL has no bitwise reductions (bool BAND/BOR excepted: they arrive as MIN/MAX) and no sparse
  // allreduce: refused at call time ("unsupported reduction operation", "unsupported layout").
  void check_reduce(const checks::Caller& caller, ReduceOp op, DType dtype, bool sparse) const override;
  // NCCL cannot receive from any source: always InvalidArgument.
  void check_any_source(const checks::Caller& caller) const override;
  // NCCL has no tags: any tag but 0 is refused rather than ignored.
  void check_tag(const checks::Caller& caller, int tag) const override;

 private:
  // The body of one op: the NCCL calls (run under the communicator's lock) and CUDA work on the lane's
  // stream. `tensors` are kept alive until an abort of the communicator has finished, should it time out.
  struct Launch;
  void launch(const OpContext& ctx, const char* call, const std::vector<Tensor>& tensors, const Launch& body);
  nccl::NcclLane& lane(const OpContext& ctx);
  void check_buffer(const Tensor& t, const char* role, const OpContext& ctx) const;

  int rank() const { return shape_.rank; }
  int size() const { return shape_.size; }
  const std::string& group_name() const { return shape_.name; }

  // First: selected (or refused) before anything else is set up.
  int device_ = 0;
  const GroupShape shape_;
  BackendOptions options_;
  std::shared_ptr<nccl::NcclWatchdog> watchdog_;
  std::vector<std::unique_ptr<nccl::NcclLane>> nccl_lanes_;  // index = lane; each touched only by its lane thread
  std::unique_ptr<nccl::NcclP2P> p2p_;
};

// The engine of the "nccl" backend (composed into a group by collectives/registry/engine_factory.h).
std::unique_ptr<Engine> make_nccl_engine(const BackendOptions& options);
// A group of the NCCL engine alone (no shared-memory engine: its tensors are on the GPU), for programs that
// link this engine only (the GPU tests); create_process_group("nccl", ...) gives the same.
std::shared_ptr<ProcessGroup> create_nccl_process_group(const BackendOptions& options);

}  // namespace braid::collectives
