// Engine: the small interface every way of moving a group's data implements: Open MPI (mpi/), Gloo (gloo/),
// NCCL (nccl/) and shared memory between the ranks of one host (shm/). An engine sees only flat, contiguous,
// dense buffers of a dtype it accepts, one op at a time per lane, in issue order; the group around it
// (queue/engine_process_group.h) does the argument checks, ordering, packing, dtype rewrites, errors and
// deadlines, and its policy (queue/engine_policy.h) chooses which engine runs each op.
//
// Declining: a primitive returns false when the engine does not take this op after all (the shared-memory
// engine when a rank's buffer is not where it must be, or the ranks are not on one host). Every rank of the
// group must decline alike (the engine decides from values every rank shares), and the group then runs
// the op on its next engine. The network engines take every op they are given and return true.
//
// Errors: throw on failure; throw TimeoutError when ctx.deadline passes (the group adds the report of the
// ranks that never joined). Counts are in elements.
//
// Thread-safety: the primitives of one lane are called by one thread at a time; different lanes may run
// at once. post_send/post_recv are called from the caller's thread and must not block.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/deadline.h"
#include "collectives/core/checks.h"
#include "collectives/core/reduce_op.h"
#include "collectives/core/work.h"
#include "tensor/tensor.h"

namespace braid::collectives {

// What a primitive needs to know about the op it serves.
struct OpContext {
  uint64_t seq = 0;
  std::string what;     // ProcessGroup::describe_op(...) e.g. "allreduce #3 on group 'world' (rank 0/2, mpi)"
  Deadline deadline = Deadline::never();
  int lane = 0;         // which engine context/communicator to use
  // reduce_scatter: the engine may overwrite the input (the caller's ReduceScatterOptions::input_is_scratch,
  // or a packed copy of it).
  bool input_is_scratch = false;
};

// Reduce ops as engines see them: AVG, PREMUL_SUM and bool are already rewritten by the group.
enum class EngineOp : uint8_t { SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR };
std::string_view engine_op_name(EngineOp op);  // "SUM", ... for engines' messages

// The rank, size and name of the group an engine serves.
struct GroupShape {
  int rank = 0;
  int size = 1;
  std::string name;
};

class Engine {
 public:
  virtual ~Engine() = default;

  // "mpi", "gloo", "nccl", "shm": in logs and in the group's backend_name() (for the network engine).
  virtual std::string_view name() const = 0;
  // How many lanes (concurrent op queues) the engine serves; op n runs on lane n % lanes on every rank.
  virtual int lanes() const = 0;

  virtual bool broadcast(Tensor& buffer, int root, const OpContext& ctx) = 0;
  virtual bool allreduce(Tensor& buffer, EngineOp op, const OpContext& ctx) = 0;
  // Only the root's buffer is defined afterwards.
  virtual bool reduce(Tensor& buffer, EngineOp op, int root, const OpContext& ctx) = 0;
  // output holds size * input.numel() elements, rank-major.
  virtual bool allgather(const Tensor& input, Tensor& output, const OpContext& ctx) = 0;
  // The root's output holds size * input.numel() elements; `output` is undefined on other ranks.
  virtual bool gather(const Tensor& input, Tensor& output, int root, const OpContext& ctx) = 0;
  // The root's input holds size * output.numel() elements; `input` is undefined on other ranks.
  virtual bool scatter(const Tensor& input, Tensor& output, int root, const OpContext& ctx) = 0;
  // input holds size * output.numel() elements; output receives this rank's block of the reduction.
  virtual bool reduce_scatter(const Tensor& input, Tensor& output, EngineOp op, const OpContext& ctx) = 0;
  // Block r of input (send_counts[r] elements at send_offsets[r]) goes to rank r; likewise for receiving.
  virtual bool alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                        const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& recv_counts,
                        const std::vector<int64_t>& recv_offsets, const OpContext& ctx) = 0;
  virtual bool barrier(const OpContext& ctx) = 0;

  // Posted from the calling thread; must not block. Complete `work` (finish / finish_with_error) when
  // done, or with TimeoutError once `deadline` passed; for a recv, call work->set_source_rank(src) first.
  // src == -1 means any source.
  virtual void post_send(const Tensor& buffer, int dst, int tag, const Deadline& deadline,
                         std::shared_ptr<Work> work) = 0;
  virtual void post_recv(Tensor& buffer, int src, int tag, const Deadline& deadline, std::shared_ptr<Work> work) = 0;
  // Refuses, at call time, a receive from any source when the engine cannot match one (NCCL). Throw
  // through checks::fail.
  virtual void check_any_source(const checks::Caller& /*caller*/) const {}
  // Refuses, at call time, a send or receive tag the engine would not honour (NCCL: any but 0).
  virtual void check_tag(const checks::Caller& /*caller*/, int /*tag*/) const {}

  // Which dtypes the engine reduces natively. The group converts others (bool -> uint8, float16/bfloat16
  // -> float32) before calling a primitive.
  virtual bool reduces(DType dtype) const {
    return dtype != DType::Bool && dtype != DType::Float16 && dtype != DType::BFloat16;
  }
  // Whether tensors may live on CUDA (nccl) or on the CPU (mpi, gloo, shm).
  virtual bool accepts_cuda() const { return false; }
  virtual bool accepts_cpu() const { return true; }
  // Where ops without tensors (barrier, the BRAID_DEBUG=DETAIL fingerprint) move their few bytes.
  virtual Device device() const { return Device::cpu(); }
  // Refuses, at call time, a reduction the engine cannot do (after the generic checks::reduce_op): e.g.
  // NCCL has no bitwise reductions and no sparse allreduce. Throw through checks::fail.
  virtual void check_reduce(const checks::Caller& /*caller*/, ReduceOp /*op*/, DType /*dtype*/,
                            bool /*sparse*/) const {}

  // A CPU buffer that every rank on this host maps (the shared-memory engine's pool), usable by ops with
  // sequence number `first_seq` and later; nullptr: the engine has none (ordinary memory is used).
  // Collective on the first call, like the group's empty_shared.
  virtual std::shared_ptr<Storage> allocate_shared(size_t /*nbytes*/, uint64_t /*first_seq*/) { return nullptr; }
  // Counters of the paths taken ("pool_allreduce", "broadcast", ...), for tests and logs.
  virtual std::vector<std::pair<std::string, uint64_t>> counters() const { return {}; }
};

}  // namespace braid::collectives
