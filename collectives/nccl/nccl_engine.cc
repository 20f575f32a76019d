#include "collectives/nccl/nccl_engine.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <functional>

#include "base/check.h"
#include "base/logging.h"
#include "collectives/core/checks.h"
#include "collectives/nccl/backoff.h"
#include "collectives/nccl/cuda_handles.h"
#include "collectives/nccl/nccl_comm.h"
#include "collectives/nccl/nccl_p2p.h"
#include "collectives/nccl/nccl_types.h"
#include "collectives/nccl/nccl_watchdog.h"
#include "collectives/queue/engine_process_group.h"
#include "collectives/queue/op_queue.h"
#include "store/rendezvous.h"
#include "tensor/cuda/device_api.h"

namespace braid::collectives {

namespace nccl {

// What one lane owns. Members are destroyed bottom-up: the communicator (finalized) before its stream.
struct NcclLane {
  explicit NcclLane(int device) : stream(device) {}
  CudaStream stream;
  CudaEvent inputs_ready;  // recorded on the default stream; the lane's stream waits for it
  CudaEvent done;          // recorded on the lane's stream after the op's NCCL calls
  Tensor barrier_buffer;   // one float32 element for barrier()
  std::shared_ptr<NcclComm> comm;
};

}  // namespace nccl

struct NcclEngine::Launch {
  std::function<ncclResult_t(ncclComm_t, cudaStream_t)> calls;
};

namespace {

// The device of this rank (see the header), or InvalidArgument saying why there is none.
int select_device(const BackendOptions& options) {
  const int count = cuda::device_count();
  if (count == 0) {
    BRAID_THROW(InvalidArgument, "nccl backend needs a CUDA device: {}",
                cuda::is_built() ? cuda::unavailable_reason() : "this build has no CUDA support");
  }
  if (options.cuda_device >= 0) {
    BRAID_CHECK_ARG(options.cuda_device < count,
                    "nccl backend needs a CUDA device: cuda_device {} was requested for group '{}' but only {} "
                    "device(s) are visible",
                    options.cuda_device, options.group_name, count);
    return options.cuda_device;
  }
  int local_rank = -1;
  try {
    local_rank = store::detect_launch().local_rank;
  } catch (const std::exception& e) {
    logging::get("braid.collectives")->debug("nccl: no local rank from the launcher ({}); using the group rank", e.what());
  }
  return (local_rank >= 0 ? local_rank : options.rank) % count;
}

GroupShape checked_shape(const BackendOptions& options) {
  BRAID_CHECK_ARG(options.size == 1 || options.store != nullptr,
                  "nccl backend: group '{}' has {} ranks but no store; NCCL ids travel through the group's store",
                  options.group_name, options.size);
  return GroupShape{options.rank, options.size, options.group_name};
}

char* byte_ptr(const Tensor& t, int64_t element_offset) {
  return static_cast<char*>(t.data_ptr()) + element_offset * static_cast<int64_t>(t.element_size());
}

// Runs a sequence of grouped NCCL calls; the first failing call's result wins, and ncclGroupEnd always
// runs so that the thread's group state is closed.
ncclResult_t grouped(const std::function<void(const std::function<void(ncclResult_t)>&)>& calls) {
  ncclResult_t first = ncclGroupStart();
  if (first != ncclSuccess) return first;
  calls([&](ncclResult_t r) {
    if (first == ncclSuccess && r != ncclSuccess) first = r;
  });
  const ncclResult_t end = ncclGroupEnd();
  return first != ncclSuccess ? first : end;
}

}  // namespace

NcclEngine::NcclEngine(const BackendOptions& options)
    : device_(select_device(options)),
      shape_(checked_shape(options)),
      options_(options),
      watchdog_(nccl::NcclWatchdog::shared()) {
  nccl_lanes_.resize(static_cast<size_t>(lanes()));
  nccl::NcclP2P::Config p2p;
  p2p.rank = rank();
  p2p.size = size();
  p2p.device = device_;
  p2p.group = group_name();
  p2p.store = options.store;
  p2p.watchdog = watchdog_;
  p2p_ = std::make_unique<nccl::NcclP2P>(std::move(p2p));
  logging::get("braid.collectives")->debug("nccl group '{}': rank {}/{} on cuda:{} ({})", group_name(), rank(), size(),
                                           device_, cuda::device_name(device_));
}

NcclEngine::~NcclEngine() {
  // The group drained its lanes first: every queued op completed or timed out while the communicators existed.
  p2p_.reset();        // fails what is left of send/recv and joins the completion thread
  nccl_lanes_.clear(); // finalizes the lane communicators
}

// ---- call-time refusals ----

void NcclEngine::check_reduce(const checks::Caller& caller, ReduceOp op, DType dtype, bool sparse) const {
  // The group would stage a sparse allreduce through CPU buffers, which this engine cannot move: refuse it
  // at call time rather than fail (and break the group) on the lane.
  if (sparse) {
    checks::fail(caller, "unsupported layout: the nccl backend has no sparse allreduce (braid's sparse tensors live "
                         "on the CPU); use the gloo or mpi backend");
  }
  // Bool BAND/BOR arrive as MIN/MAX (flat::engine_op); everything else bitwise has no NCCL op.
  const bool logical = dtype == DType::Bool && op.kind != ReduceOp::BXOR;
  if (op.is_bitwise() && !logical) {
    checks::fail(caller, fmt::format("unsupported reduction operation {} (NCCL has no bitwise reductions; use the gloo "
                                     "or mpi backend for BAND/BOR/BXOR)", op));
  }
  // Complex tensors reach the engine whole only for PRODUCT (ProcessGroup views them as real otherwise).
  if (is_complex(dtype)) {
    checks::fail(caller, fmt::format("unsupported reduction operation {} on {} tensors (NCCL has no complex type; "
                                     "SUM and AVG work, or use the gloo or mpi backend)", op, dtype));
  }
}

void NcclEngine::check_tag(const checks::Caller& caller, int tag) const {
  if (tag == 0) return;
  checks::fail(caller, fmt::format("the nccl backend does not match messages by tag (got tag {}): NCCL pairs each "
                                   "direction's sends and receives in posting order; use tag 0 and post them in "
                                   "the same order on both ranks, or use gloo or mpi",
                                   tag));
}

void NcclEngine::check_any_source(const checks::Caller& caller) const {
  checks::fail(caller, "recv from any source is not supported by NCCL (it matches messages by sender); use recv with a source "
               "rank, or the gloo or mpi backend");
}

// ---- the lane machinery ----

nccl::NcclLane& NcclEngine::lane(const OpContext& ctx) {
  auto& slot = nccl_lanes_.at(static_cast<size_t>(ctx.lane));
  if (!slot) {
    slot = std::make_unique<nccl::NcclLane>(device_);
    slot->barrier_buffer = Tensor::empty({1}, TensorOptions(DType::Float32, Device::cuda(device_)));
    slot->barrier_buffer.zero_();
  }
  nccl::NcclLane& l = *slot;
  if (l.comm) return l;
  // Lazily, on the lane's first op: every rank reaches it at that op, within that op's deadline.
  const std::string key = fmt::format("nccl/lane/{}/id", ctx.lane);
  ncclUniqueId id;
  if (size() == 1) {
    id = nccl::local_unique_id();
  } else if (rank() == 0) {
    id = nccl::publish_unique_id(*options_.store, key);
  } else {
    id = nccl::read_unique_id(*options_.store, key, ctx.deadline, ctx.what, 0);
  }
  l.comm = std::make_shared<nccl::NcclComm>(size(), rank(), id, device_,
                                            fmt::format("group '{}' lane {}", group_name(), ctx.lane));
  try {
    l.comm->wait_ready(ctx.deadline, ctx.what);
  } catch (const std::exception& e) {
    watchdog_->abort_async(l.comm, fmt::format("creating the communicator failed: {}", e.what()));
    throw;
  }
  logging::get("braid.collectives")->debug("nccl group '{}': communicator {} ready", group_name(), l.comm->name());
  return l;
}

void NcclEngine::check_buffer(const Tensor& t, const char* role, const OpContext& ctx) const {
  BRAID_ASSERT(t.defined(), "{}: {} is undefined", ctx.what, role);
  BRAID_CHECK_ARG(t.is_cuda() && t.device().index == device_,
                  "{}: the {} is on {}, but this rank's nccl group uses cuda:{} (set BackendOptions.cuda_device, or "
                  "move the tensors)",
                  ctx.what, role, t.device().str(), device_);
  BRAID_ASSERT(t.is_contiguous(), "{}: {} must be contiguous", ctx.what, role);
}

void NcclEngine::launch(const OpContext& ctx, const char* call, const std::vector<Tensor>& tensors,
                              const Launch& body) {
  if (ctx.deadline.expired()) {
    BRAID_THROW(TimeoutError, "{}: the deadline passed before the op reached NCCL ({})", ctx.what, call);
  }
  nccl::DeviceGuard guard(device_);
  nccl::NcclLane& l = lane(ctx);
  const std::shared_ptr<nccl::NcclComm> comm = l.comm;
  const cudaStream_t stream = l.stream.get();
  auto watch = watchdog_->watch(comm, ctx.deadline, ctx.what);
  try {
    nccl::order_after_default_stream(stream, l.inputs_ready.get(), ctx.what);
    comm->run(ctx.what, call, ctx.deadline, [&](ncclComm_t c) { return body.calls(c, stream); });
    nccl::check_cuda(cudaEventRecord(l.done.get(), stream), "cudaEventRecord", ctx.what);
    const auto issued = Clock::now();
    size_t bytes = 0;
    for (const Tensor& t : tensors) bytes += t.defined() ? t.nbytes() : 0;
    nccl::Backoff backoff(nccl::Backoff::busy_window(bytes));
    for (;;) {
      const cudaError_t q = cudaEventQuery(l.done.get());
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) nccl::check_cuda(q, "cudaEventQuery", ctx.what);
      comm->check_healthy(ctx.what);
      if (ctx.deadline.expired()) {
        BRAID_THROW(TimeoutError, "{}: {} did not complete by the op's deadline ({:.0f} ms after it was issued); the "
                    "nccl communicator {} is aborted",
                    ctx.what, call, elapsed_ms(issued), comm->name());
      }
      backoff.pause();
    }
  } catch (const std::exception& e) {
    // The kernels may still be queued or running: abort them, and keep their buffers alive until then.
    watchdog_->abort_async(comm, e.what(), std::make_shared<std::vector<Tensor>>(tensors));
    throw;
  }
}

// ---- primitives ----

bool NcclEngine::broadcast(Tensor& buffer, int root, const OpContext& ctx) {
  check_buffer(buffer, "buffer", ctx);
  const auto n = static_cast<size_t>(buffer.numel());
  if (n == 0) return true;
  void* data = buffer.data_ptr();
  const ncclDataType_t dt = nccl::to_nccl(buffer.dtype());
  launch(ctx, "ncclBroadcast", {buffer}, {[=](ncclComm_t c, cudaStream_t s) {
           return ncclBroadcast(data, data, n, dt, root, c, s);
         }});
  return true;
}

bool NcclEngine::allreduce(Tensor& buffer, EngineOp op, const OpContext& ctx) {
  check_buffer(buffer, "buffer", ctx);
  const ncclRedOp_t rop = nccl::to_nccl(op, ctx.what);
  const auto n = static_cast<size_t>(buffer.numel());
  if (n == 0) return true;
  void* data = buffer.data_ptr();
  const ncclDataType_t dt = nccl::to_nccl(buffer.dtype());
  launch(ctx, "ncclAllReduce", {buffer}, {[=](ncclComm_t c, cudaStream_t s) {
           return ncclAllReduce(data, data, n, dt, rop, c, s);
         }});
  return true;
}

bool NcclEngine::reduce(Tensor& buffer, EngineOp op, int root, const OpContext& ctx) {
  check_buffer(buffer, "buffer", ctx);
  const ncclRedOp_t rop = nccl::to_nccl(op, ctx.what);
  const auto n = static_cast<size_t>(buffer.numel());
  if (n == 0) return true;
  void* data = buffer.data_ptr();
  const ncclDataType_t dt = nccl::to_nccl(buffer.dtype());
  launch(ctx, "ncclReduce", {buffer}, {[=](ncclComm_t c, cudaStream_t s) {
           return ncclReduce(data, data, n, dt, rop, root, c, s);
         }});
  return true;
}

bool NcclEngine::allgather(const Tensor& input, Tensor& output, const OpContext& ctx) {
  check_buffer(input, "input", ctx);
  check_buffer(output, "output", ctx);
  const auto n = static_cast<size_t>(input.numel());
  BRAID_ASSERT(output.numel() == input.numel() * size(), "{}: allgather output holds {} elements, expected {}",
               ctx.what, output.numel(), input.numel() * size());
  if (n == 0) return true;
  const void* in = input.data_ptr();
  void* out = output.data_ptr();
  const ncclDataType_t dt = nccl::to_nccl(input.dtype());
  launch(ctx, "ncclAllGather", {input, output}, {[=](ncclComm_t c, cudaStream_t s) {
           return ncclAllGather(in, out, n, dt, c, s);
         }});
  return true;
}

bool NcclEngine::reduce_scatter(const Tensor& input, Tensor& output, EngineOp op, const OpContext& ctx) {
  check_buffer(input, "input", ctx);
  check_buffer(output, "output", ctx);
  const ncclRedOp_t rop = nccl::to_nccl(op, ctx.what);
  const auto n = static_cast<size_t>(output.numel());
  BRAID_ASSERT(input.numel() == output.numel() * size(), "{}: reduce_scatter input holds {} elements, expected {}",
               ctx.what, input.numel(), output.numel() * size());
  if (n == 0) return true;
  const void* in = input.data_ptr();
  void* out = output.data_ptr();
  const ncclDataType_t dt = nccl::to_nccl(output.dtype());
  launch(ctx, "ncclReduceScatter", {input, output}, {[=](ncclComm_t c, cudaStream_t s) {
           return ncclReduceScatter(in, out, n, dt, rop, c, s);
         }});
  return true;
}

bool NcclEngine::gather(const Tensor& input, Tensor& output, int root, const OpContext& ctx) {
  check_buffer(input, "input", ctx);
  const bool is_root = rank() == root;
  const int64_t n = input.numel();
  if (is_root) {
    check_buffer(output, "output", ctx);
    BRAID_ASSERT(output.numel() == n * size(), "{}: gather output holds {} elements, expected {}", ctx.what,
                 output.numel(), n * size());
  }
  if (n == 0) return true;
  const ncclDataType_t dt = nccl::to_nccl(input.dtype());
  const size_t bytes = static_cast<size_t>(n) * input.element_size();
  const int me = rank();
  const int ranks = size();
  const Tensor out = is_root ? output : Tensor();
  launch(ctx, "ncclSend/ncclRecv (gather)", {input, out}, {[&, dt, bytes, me, ranks, n](ncclComm_t c, cudaStream_t s) {
           if (is_root) {
             nccl::check_cuda(cudaMemcpyAsync(byte_ptr(out, me * n), input.data_ptr(), bytes, cudaMemcpyDeviceToDevice, s),
                              "cudaMemcpyAsync", ctx.what);
           }
           return grouped([&](const std::function<void(ncclResult_t)>& note) {
             if (!is_root) {
               note(ncclSend(input.data_ptr(), static_cast<size_t>(n), dt, root, c, s));
               return;
             }
             for (int r = 0; r < ranks; ++r) {
               if (r != me) note(ncclRecv(byte_ptr(out, r * n), static_cast<size_t>(n), dt, r, c, s));
             }
           });
         }});
  return true;
}

bool NcclEngine::scatter(const Tensor& input, Tensor& output, int root, const OpContext& ctx) {
  check_buffer(output, "output", ctx);
  const bool is_root = rank() == root;
  const int64_t n = output.numel();
  if (is_root) {
    check_buffer(input, "input", ctx);
    BRAID_ASSERT(input.numel() == n * size(), "{}: scatter input holds {} elements, expected {}", ctx.what,
                 input.numel(), n * size());
  }
  if (n == 0) return true;
  const ncclDataType_t dt = nccl::to_nccl(output.dtype());
  const size_t bytes = static_cast<size_t>(n) * output.element_size();
  const int me = rank();
  const int ranks = size();
  const Tensor in = is_root ? input : Tensor();
  launch(ctx, "ncclSend/ncclRecv (scatter)", {in, output}, {[&, dt, bytes, me, ranks, n](ncclComm_t c, cudaStream_t s) {
           if (is_root) {
             nccl::check_cuda(cudaMemcpyAsync(output.data_ptr(), byte_ptr(in, me * n), bytes, cudaMemcpyDeviceToDevice, s),
                              "cudaMemcpyAsync", ctx.what);
           }
           return grouped([&](const std::function<void(ncclResult_t)>& note) {
             if (!is_root) {
               note(ncclRecv(output.data_ptr(), static_cast<size_t>(n), dt, root, c, s));
               return;
             }
             for (int r = 0; r < ranks; ++r) {
               if (r != me) note(ncclSend(byte_ptr(in, r * n), static_cast<size_t>(n), dt, r, c, s));
             }
           });
         }});
  return true;
}

bool NcclEngine::alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                                    const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& recv_counts,
                                    const std::vector<int64_t>& recv_offsets, const OpContext& ctx) {
  const auto ranks = static_cast<size_t>(size());
  BRAID_ASSERT(send_counts.size() == ranks && send_offsets.size() == ranks && recv_counts.size() == ranks &&
                   recv_offsets.size() == ranks,
               "{}: alltoall needs one count and offset per rank", ctx.what);
  const int me = rank();
  const auto self = static_cast<size_t>(me);
  BRAID_CHECK_ARG(send_counts[self] == recv_counts[self],
                  "{}: this rank sends itself {} elements but expects {} (NCCL needs the two equal)", ctx.what,
                  send_counts[self], recv_counts[self]);
  int64_t total_send = 0, total_recv = 0;
  for (size_t r = 0; r < ranks; ++r) {
    total_send += send_counts[r];
    total_recv += recv_counts[r];
  }
  if (total_send > 0) check_buffer(input, "input", ctx);
  if (total_recv > 0) check_buffer(output, "output", ctx);
  if (total_send == 0 && total_recv == 0) return true;
  const Tensor in = total_send > 0 ? input : Tensor();
  const Tensor out = total_recv > 0 ? output : Tensor();
  const ncclDataType_t dt = nccl::to_nccl(total_send > 0 ? input.dtype() : output.dtype());
  launch(ctx, "ncclSend/ncclRecv (alltoall)", {in, out}, {[&, dt, me, self](ncclComm_t c, cudaStream_t s) {
           if (send_counts[self] > 0) {
             const size_t bytes = static_cast<size_t>(send_counts[self]) * in.element_size();
             nccl::check_cuda(cudaMemcpyAsync(byte_ptr(out, recv_offsets[self]), byte_ptr(in, send_offsets[self]), bytes,
                                              cudaMemcpyDeviceToDevice, s),
                              "cudaMemcpyAsync", ctx.what);
           }
           return grouped([&](const std::function<void(ncclResult_t)>& note) {
             for (int r = 0; r < static_cast<int>(send_counts.size()); ++r) {
               if (r == me) continue;
               const auto i = static_cast<size_t>(r);
               if (send_counts[i] > 0) {
                 note(ncclSend(byte_ptr(in, send_offsets[i]), static_cast<size_t>(send_counts[i]), dt, r, c, s));
               }
               if (recv_counts[i] > 0) {
                 note(ncclRecv(byte_ptr(out, recv_offsets[i]), static_cast<size_t>(recv_counts[i]), dt, r, c, s));
               }
             }
           });
         }});
  return true;
}

bool NcclEngine::barrier(const OpContext& ctx) {
  nccl::DeviceGuard guard(device_);
  Tensor buffer = lane(ctx).barrier_buffer;
  void* data = buffer.data_ptr();
  launch(ctx, "ncclAllReduce (barrier)", {buffer}, {[=](ncclComm_t c, cudaStream_t s) {
           return ncclAllReduce(data, data, 1, ncclFloat32, ncclSum, c, s);
         }});
  return true;
}

// ---- point to point ----


int NcclEngine::lanes() const { return 1; }

void NcclEngine::post_send(const Tensor& buffer, int dst, int /*tag*/, const Deadline& deadline,
                           std::shared_ptr<Work> work) {
  BRAID_CHECK_ARG(dst >= 0 && dst < size() && dst != rank(), "{}: invalid destination rank {} (group of {} ranks)",
                  work->what(), dst, size());
  BRAID_CHECK_ARG(buffer.is_cuda() && buffer.device().index == device_,
                  "{}: the tensor is on {}, but this rank's nccl group uses cuda:{}", work->what(), buffer.device().str(),
                  device_);
  p2p_->post(true, buffer, dst, deadline.remaining(), std::move(work));
}

void NcclEngine::post_recv(Tensor& buffer, int src, int /*tag*/, const Deadline& deadline,
                           std::shared_ptr<Work> work) {
  BRAID_CHECK_ARG(src != -1, "{}: recv from any source is not supported by NCCL", work->what());
  BRAID_CHECK_ARG(src >= 0 && src < size() && src != rank(), "{}: invalid source rank {} (group of {} ranks)",
                  work->what(), src, size());
  BRAID_CHECK_ARG(buffer.is_cuda() && buffer.device().index == device_,
                  "{}: the tensor is on {}, but this rank's nccl group uses cuda:{}", work->what(), buffer.device().str(),
                  device_);
  p2p_->post(false, buffer, src, deadline.remaining(), std::move(work));
}

std::unique_ptr<Engine> make_nccl_engine(const BackendOptions& options) {
  return std::make_unique<NcclEngine>(options);
}

std::shared_ptr<ProcessGroup> create_nccl_process_group(const BackendOptions& options) {
  auto engine = make_nccl_engine(options);
  EngineProcessGroup::Config config;
  config.store = options.store;
  config.timeout = options.timeout;
  config.policy = EnginePolicy::resolve(engine->name(), options);
  return std::make_shared<EngineProcessGroup>(GroupShape{options.rank, options.size, options.group_name},
                                              std::move(engine), nullptr, std::move(config));
}

}  // namespace braid::collectives
