#include "collectives/mpi/mpi_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/copy_bytes.h"
#include "base/env.h"
#include "collectives/mpi/direct_exchange.h"
#include "collectives/mpi/mpi_p2p.h"
#include "collectives/mpi/mpi_runtime.h"
#include "collectives/mpi/mpi_types.h"
#include "collectives/mpi/mpi_wait.h"
#include "collectives/queue/op_queue.h"

namespace braid::collectives::mpi {

namespace {

// One lane: MPI collectives of one communicator run in order anyway, and a second lane would only add a
// second thread polling the same progress engine.
constexpr int kLanes = 1;

// Up to this many ranks allgather, reduce_scatter, alltoall and small allreduces are one direct exchange
// of blocks between every pair of ranks (run_exchange; allgather on 3 ranks or more only up to
// kDirectAllgatherMaxBytes). Measured at 2 and 4 ranks only; with many ranks,
// 2(p-1) messages in flight per rank at once are left to libnbc's algorithms (a judgement, not a measured
// crossover).
constexpr int kDirectExchangeMaxRanks = 8;
// Allreduces of up to this many bytes in groups of 3 to kDirectExchangeMaxRanks ranks are one direct
// exchange of the whole buffers (run_direct_allreduce). braid / raw MPI_Allreduce (paired, 9-11 rounds),
// libnbc's MPI_Iallreduce -> the exchange: 4 ranks (2 per core) 4 KiB 1.16-1.18x -> 1.20-1.23x (+4 us
// either way), 16 KiB 1.16-1.17x -> 0.84-0.85x, 32 KiB 1.10x -> 0.94-1.05x, 64 KiB 1.16x -> 1.14x, but
// 256 KiB 0.98x -> 1.27x; 3 ranks 4 KiB 1.30x -> 1.07x, 16 KiB 1.05x -> 0.68x, 64 KiB 1.25x -> 1.09x,
// 256 KiB 0.96x -> 1.23x. Each rank receives p-1 whole buffers, so the exchange is for latency-bound
// sizes only; with 2 ranks MPI's own exchange is the same single step.
constexpr size_t kDirectAllreduceMaxBytes = 32 * 1024;

// On more than 2 ranks, allgathers of more than this many output bytes go to libnbc's MPI_Iallgather
// instead of the direct exchange, which collapsed there with blocks of about 0.5-1.5 MiB. braid / raw
// MPI_Allgather, staging off (paired medians; direct exchange -> MPI_Iallgather): 4 ranks 1 MiB 0.99x ->
// 1.04x, 2 MiB 2.43x -> 0.98x, 4 MiB 2.50x -> 0.95x, 16 MiB 0.95x -> 0.89x; 3 ranks 3 MiB 1.38x -> 0.82x,
// 6 MiB 0.47x -> 0.50x, 24 MiB 0.44x -> 0.40x. On 2 ranks the direct exchange is one send each way and
// stays (16 MiB: 1.03x).
constexpr size_t kDirectAllgatherMaxBytes = size_t{1} << 20;

// From this input size on, reduce_scatter runs as an allreduce (see reduce_scatter).
constexpr size_t kReduceScatterViaAllreduce = size_t{8} << 20;

// Allreduces of more than this many bytes run as several MPI_Iallreduce calls of at most this size, one
// after the other, inside the one braid op (README.md, "Large allreduces in chunks").
constexpr int64_t kDefaultAllreduceChunkBytes = int64_t{16} << 20;
constexpr const char* kAllreduceChunkEnv = "BRAID_MPI_ALLREDUCE_CHUNK_BYTES";

int64_t allreduce_chunk_bytes(const BackendOptions& options) {
  int64_t bytes = kDefaultAllreduceChunkBytes;
  const char* source = "BackendOptions::mpi_allreduce_chunk_bytes";
  if (options.mpi_allreduce_chunk_bytes) {
    bytes = *options.mpi_allreduce_chunk_bytes;
  } else if (const auto text = env::get(kAllreduceChunkEnv)) {
    bytes = env::parse_size(*text, kAllreduceChunkEnv);
    source = kAllreduceChunkEnv;
  }
  BRAID_CHECK_ARG(bytes >= 0, "creating mpi group '{}': {} must be a size >= 0 (0: no chunking), got {}",
                  options.group_name, source, bytes);
  return bytes;
}

// The tag of MPI_Comm_create_group: it only has to tell apart creations that run concurrently in one
// process (from different threads), which always have different group names.
int creation_tag(const std::string& name) {
  return static_cast<int>(std::hash<std::string>{}(name) % 32768U);  // MPI_TAG_UB is at least 32767
}

void* ptr(const Tensor& t) { return t.defined() && t.numel() > 0 ? t.data_ptr() : nullptr; }

}  // namespace

// ---- construction and destruction ----

MpiEngine::MpiEngine(const BackendOptions& options)
    : shape_{options.rank, options.size, options.group_name},
      runtime_(MpiRuntime::acquire()),
      allreduce_chunk_bytes_(allreduce_chunk_bytes(options)) {
  create_communicators(options);
  p2p_ = std::make_unique<MpiP2p>(comms_.p2p, runtime_, options.group_name);
  direct_ = std::make_unique<DirectExchange>(shape_.rank, shape_.size, *p2p_);
}

MpiEngine::~MpiEngine() {
  // The group drained its lanes before destroying its engines (every queued op completed or timed out
  // while the communicators still existed, send/recv Works included, which the progress thread completes).
  if (p2p_) p2p_->stop();
  // comms_ and then runtime_ are released by their destructors, in that order.
}

MpiEngine::Communicators::~Communicators() {
  if (MpiRuntime::finalized()) return;  // the application finalised MPI first; its handles are gone
  for (auto& c : lanes) {
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  }
  if (p2p != MPI_COMM_NULL) MPI_Comm_free(&p2p);
  if (group != MPI_COMM_NULL) MPI_Comm_free(&group);
}

void MpiEngine::create_communicators(const BackendOptions& options) {
  const std::string what = fmt::format("creating mpi group '{}' (rank {}/{})", options.group_name, options.rank,
                                       options.size);
  const int world_rank = runtime_->world_rank();
  const int world_size = runtime_->world_size();
  if (options.global_ranks.empty()) {
    BRAID_CHECK_ARG(options.size == world_size && options.rank == world_rank,
                    "{}: MPI_COMM_WORLD has this process as rank {} of {}; the mpi backend needs every rank "
                    "started by mpirun (mpirun -np {} ...) with matching rank numbers",
                    what, world_rank, world_size, options.size);
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comms_.group), "MPI_Comm_dup", what);
  } else {
    const auto& members = options.global_ranks;
    BRAID_CHECK_ARG(static_cast<int>(members.size()) == options.size, "{}: {} global ranks for a group of size {}",
                    what, members.size(), options.size);
    BRAID_CHECK_ARG(std::set<int>(members.begin(), members.end()).size() == members.size(),
                    "{}: global ranks must be distinct, got [{}]", what, fmt::join(members, ", "));
    for (int r : members) {
      BRAID_CHECK_ARG(r >= 0 && r < world_size, "{}: global rank {} is outside MPI_COMM_WORLD (size {})", what, r,
                      world_size);
    }
    BRAID_CHECK_ARG(members[static_cast<size_t>(options.rank)] == world_rank,
                    "{}: group rank {} should be world rank {}, but this process is world rank {}", what,
                    options.rank, members[static_cast<size_t>(options.rank)], world_rank);
    MPI_Group world_group = MPI_GROUP_NULL;
    MPI_Group group = MPI_GROUP_NULL;
    check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &world_group), "MPI_Comm_group", what);
    int rc = MPI_Group_incl(world_group, options.size, members.data(), &group);
    MPI_Group_free(&world_group);
    check_mpi(rc, "MPI_Group_incl", what);
    // Collective over the members only: non-members need not call (new_group with local synchronisation).
    rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, creation_tag(options.group_name), &comms_.group);
    MPI_Group_free(&group);
    check_mpi(rc, "MPI_Comm_create_group", what);
  }
  check_mpi(MPI_Comm_set_errhandler(comms_.group, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", what);
  int rank = -1;
  int size = -1;
  MPI_Comm_rank(comms_.group, &rank);
  MPI_Comm_size(comms_.group, &size);
  BRAID_ASSERT(rank == options.rank && size == options.size, "{}: the communicator has rank {}/{}", what, rank, size);
  const auto name = [&](const std::string& role) {
    const std::string text = fmt::format("braid:{}:{}", options.group_name, role).substr(0, MPI_MAX_OBJECT_NAME - 1);
    return text;
  };
  MPI_Comm_set_name(comms_.group, name("group").c_str());
  // The dups inherit MPI_ERRORS_RETURN.
  comms_.lanes.assign(static_cast<size_t>(lanes()), MPI_COMM_NULL);
  for (size_t i = 0; i < comms_.lanes.size(); ++i) {
    check_mpi(MPI_Comm_dup(comms_.group, &comms_.lanes[i]), "MPI_Comm_dup", what);
    MPI_Comm_set_name(comms_.lanes[i], name(fmt::format("lane{}", i)).c_str());
  }
  check_mpi(MPI_Comm_dup(comms_.group, &comms_.p2p), "MPI_Comm_dup", what);
  MPI_Comm_set_name(comms_.p2p, name("p2p").c_str());
}

// ---- collectives ----

MPI_Comm MpiEngine::lane_comm(const OpContext& ctx) const {
  BRAID_ASSERT(ctx.lane >= 0 && ctx.lane < static_cast<int>(comms_.lanes.size()), "lane {} of {}", ctx.lane,
               comms_.lanes.size());
  return comms_.lanes[static_cast<size_t>(ctx.lane)];
}

MPI_Op MpiEngine::reduce_op(EngineOp op, DType dtype) const {
  if (op == EngineOp::SUM && (dtype == DType::UInt8 || dtype == DType::Int8)) return runtime_->wrapping_byte_sum();
  return mpi_op(op);
}

template <class Start>
void MpiEngine::run_nonblocking(const char* call, const OpContext& ctx, size_t bytes, std::any keep,
                                      Start&& start) {
  const auto started = Clock::now();
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(start(&request), call, ctx.what);
  if (test_until(request, bytes, ctx.deadline, ctx.what, OpQueue::on_waiting_thread())) return;
  // MPI cannot cancel a collective: the progress thread keeps testing it, with its buffers, until a late
  // peer completes it or MPI is finalised. The group is broken from here on (the group makes it sticky).
  p2p_->adopt_abandoned(request, std::move(keep));
  BRAID_THROW(TimeoutError, "{} still incomplete after {:.0f} ms (MPI cannot cancel a collective)", call,
              elapsed_ms(started));
}

bool MpiEngine::broadcast(Tensor& buffer, int root, const OpContext& ctx) {
  const int n = mpi_count(buffer.numel(), ctx.what);
  run_nonblocking("MPI_Ibcast", ctx, buffer.nbytes(), buffer, [&](MPI_Request* r) {
    return MPI_Ibcast(ptr(buffer), n, mpi_move_type(buffer.dtype()), root, lane_comm(ctx), r);
  });
  return true;
}

bool MpiEngine::allreduce(Tensor& buffer, EngineOp op, const OpContext& ctx) {
  if (size() >= 3 && size() <= kDirectExchangeMaxRanks && buffer.nbytes() <= kDirectAllreduceMaxBytes) {
    direct_->allreduce(buffer, reduce_op(op, buffer.dtype()), lane_comm(ctx), ctx);
    return true;
  }
  const int64_t numel = buffer.numel();
  const auto elem = static_cast<int64_t>(buffer.element_size());
  // Elements per MPI_Iallreduce: the whole buffer, or chunks of at most allreduce_chunk_bytes_ (at least
  // one element). Open MPI allocates a temporary buffer of the message size on every call; above glibc's
  // mmap threshold that is a fresh mapping, page-faulted through on every call.
  const int64_t chunk = allreduce_chunk_bytes_ > 0 ? std::max<int64_t>(1, allreduce_chunk_bytes_ / elem) : numel;
  const MPI_Datatype type = mpi_reduce_type(buffer.dtype());
  const MPI_Op mpi_op = reduce_op(op, buffer.dtype());
  if (numel <= chunk) {
    const int n = mpi_count(numel, ctx.what);
    run_nonblocking("MPI_Iallreduce", ctx, buffer.nbytes(), buffer, [&](MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, ptr(buffer), n, type, mpi_op, lane_comm(ctx), r);
    });
    return true;
  }
  // In order, one at a time: every rank issues the same chunks on the lane's communicator, and a single
  // outstanding chunk keeps Open MPI's temporary buffer the size of one chunk (reused by malloc).
  char* base = static_cast<char*>(ptr(buffer));
  const int64_t chunks = (numel + chunk - 1) / chunk;
  for (int64_t i = 0; i < chunks; ++i) {
    const int64_t first = i * chunk;
    const int n = mpi_count(std::min(chunk, numel - first), ctx.what);
    const std::string call = fmt::format("MPI_Iallreduce (chunk {} of {}, {} elements)", i + 1, chunks, n);
    run_nonblocking(call.c_str(), ctx, static_cast<size_t>(n) * static_cast<size_t>(elem), buffer,
                    [&](MPI_Request* r) {
                      return MPI_Iallreduce(MPI_IN_PLACE, base + first * elem, n, type, mpi_op, lane_comm(ctx), r);
                    });
  }
  return true;
}

bool MpiEngine::reduce(Tensor& buffer, EngineOp op, int root, const OpContext& ctx) {
  const int n = mpi_count(buffer.numel(), ctx.what);
  const bool is_root = rank() == root;
  run_nonblocking("MPI_Ireduce", ctx, buffer.nbytes(), buffer, [&](MPI_Request* r) {
    return MPI_Ireduce(is_root ? MPI_IN_PLACE : ptr(buffer), is_root ? ptr(buffer) : nullptr, n,
                       mpi_reduce_type(buffer.dtype()), reduce_op(op, buffer.dtype()), root, lane_comm(ctx), r);
  });
  return true;
}

bool MpiEngine::allgather(const Tensor& input, Tensor& output, const OpContext& ctx) {
  const int n = mpi_count(input.numel(), ctx.what);
  mpi_count(output.numel(), ctx.what);
  if (n == 0) return true;
  // The input may already sit in the output's slot for this rank (allgather_into_tensor on a view).
  const bool in_place = ptr(input) == static_cast<char*>(ptr(output)) + static_cast<size_t>(rank()) * input.nbytes();
  if (size() == 2 || (size() <= kDirectExchangeMaxRanks && output.nbytes() <= kDirectAllgatherMaxBytes)) {
    direct_->allgather(input, output, in_place, lane_comm(ctx), ctx);
    return true;
  }
  const MPI_Datatype type = mpi_move_type(input.dtype());
  run_nonblocking("MPI_Iallgather", ctx, output.nbytes(), std::make_pair(input, output), [&](MPI_Request* r) {
    return MPI_Iallgather(in_place ? MPI_IN_PLACE : ptr(input), n, type, ptr(output), n, type, lane_comm(ctx), r);
  });
  return true;
}

bool MpiEngine::gather(const Tensor& input, Tensor& output, int root, const OpContext& ctx) {
  const int n = mpi_count(input.numel(), ctx.what);
  const bool is_root = rank() == root;
  const MPI_Datatype type = mpi_move_type(input.dtype());
  void* out = is_root ? ptr(output) : nullptr;
  const bool in_place = is_root && n > 0 && ptr(input) == static_cast<char*>(out) + static_cast<size_t>(rank()) * input.nbytes();
  run_nonblocking("MPI_Igather", ctx, input.nbytes() * static_cast<size_t>(size()), std::make_pair(input, output), [&](MPI_Request* r) {
    return MPI_Igather(in_place ? MPI_IN_PLACE : ptr(input), n, type, out, n, type, root, lane_comm(ctx), r);
  });
  return true;
}

bool MpiEngine::scatter(const Tensor& input, Tensor& output, int root, const OpContext& ctx) {
  const int n = mpi_count(output.numel(), ctx.what);
  const bool is_root = rank() == root;
  const MPI_Datatype type = mpi_move_type(output.dtype());
  run_nonblocking("MPI_Iscatter", ctx, output.nbytes() * static_cast<size_t>(size()), std::make_pair(input, output), [&](MPI_Request* r) {
    return MPI_Iscatter(is_root ? ptr(input) : nullptr, n, type, ptr(output), n, type, root, lane_comm(ctx), r);
  });
  return true;
}

bool MpiEngine::reduce_scatter(const Tensor& input, Tensor& output, EngineOp op, const OpContext& ctx) {
  const int n = mpi_count(output.numel(), ctx.what);
  mpi_count(input.numel(), ctx.what);
  if (input.nbytes() >= kReduceScatterViaAllreduce) {
    // An allreduce of a copy, keeping this rank's block: one extra copy of the input, but 2.6x faster
    // than libnbc's reduce_scatter_block at 16 MiB (README.md, "Measured through braid"). No copy when
    // the caller gave the input up.
    Tensor scratch = ctx.input_is_scratch ? input : input.clone();
    (void)allreduce(scratch, op, ctx);
    copy_bytes(ptr(output), static_cast<const char*>(ptr(scratch)) + static_cast<size_t>(rank()) * output.nbytes(),
               output.nbytes());
    return true;
  }
  if (n == 0) return true;
  if (size() <= kDirectExchangeMaxRanks) {
    direct_->reduce_scatter(input, output, reduce_op(op, output.dtype()), lane_comm(ctx), ctx);
    return true;
  }
  run_nonblocking("MPI_Ireduce_scatter_block", ctx, input.nbytes(), std::make_pair(input, output), [&](MPI_Request* r) {
    return MPI_Ireduce_scatter_block(ptr(input), ptr(output), n, mpi_reduce_type(output.dtype()),
                                     reduce_op(op, output.dtype()), lane_comm(ctx), r);
  });
  return true;
}

bool MpiEngine::alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                                   const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& recv_counts,
                                   const std::vector<int64_t>& recv_offsets, const OpContext& ctx) {
  const size_t ws = static_cast<size_t>(size());
  BRAID_ASSERT(send_counts.size() == ws && send_offsets.size() == ws && recv_counts.size() == ws &&
                   recv_offsets.size() == ws,
               "{}: alltoall split lists must have one entry per rank", ctx.what);
  mpi_count(input.numel(), ctx.what);
  mpi_count(output.numel(), ctx.what);
  const MPI_Datatype type = mpi_move_type(input.dtype());
  const size_t bytes = std::max(input.nbytes(), output.nbytes());
  if (size() <= kDirectExchangeMaxRanks) {
    direct_->alltoall(input, output, send_counts, send_offsets, recv_counts, recv_offsets, lane_comm(ctx), ctx);
    return true;
  }
  // Equal, packed blocks take MPI_Ialltoall (its algorithms beat alltoallv's linear exchange).
  bool uniform = true;
  for (size_t r = 0; r < ws; ++r) {
    uniform = uniform && send_counts[r] == send_counts[0] && recv_counts[r] == send_counts[0] &&
              send_offsets[r] == static_cast<int64_t>(r) * send_counts[0] &&
              recv_offsets[r] == static_cast<int64_t>(r) * send_counts[0];
  }
  if (uniform) {
    const int n = static_cast<int>(send_counts[0]);
    run_nonblocking("MPI_Ialltoall", ctx, bytes, std::make_pair(input, output), [&](MPI_Request* r) {
      return MPI_Ialltoall(ptr(input), n, type, ptr(output), n, type, lane_comm(ctx), r);
    });
    return true;
  }
  // MPI reads the count and displacement arrays until the operation completes: they live in `keep`.
  struct Layout {
    std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
  };
  auto layout = std::make_shared<Layout>();
  const auto to_int = [&](const std::vector<int64_t>& v) {
    std::vector<int> out(v.size());
    std::transform(v.begin(), v.end(), out.begin(), [&](int64_t x) { return mpi_count(x, ctx.what); });
    return out;
  };
  layout->send_counts = to_int(send_counts);
  layout->send_displs = to_int(send_offsets);
  layout->recv_counts = to_int(recv_counts);
  layout->recv_displs = to_int(recv_offsets);
  run_nonblocking("MPI_Ialltoallv", ctx, bytes, std::make_tuple(input, output, layout), [&](MPI_Request* r) {
    return MPI_Ialltoallv(ptr(input), layout->send_counts.data(), layout->send_displs.data(), type, ptr(output),
                          layout->recv_counts.data(), layout->recv_displs.data(), type, lane_comm(ctx), r);
  });
  return true;
}

bool MpiEngine::barrier(const OpContext& ctx) {
  run_nonblocking("MPI_Ibarrier", ctx, 0, std::any(), [&](MPI_Request* r) { return MPI_Ibarrier(lane_comm(ctx), r); });
  return true;
}

// ---- point-to-point ----

void MpiEngine::post_send(const Tensor& buffer, int dst, int tag, const Deadline& deadline,
                          std::shared_ptr<Work> work) {
  p2p_->post_send(buffer, dst, tag, deadline, std::move(work));
}

void MpiEngine::post_recv(Tensor& buffer, int src, int tag, const Deadline& deadline, std::shared_ptr<Work> work) {
  p2p_->post_recv(buffer, src, tag, deadline, std::move(work));
}

int MpiEngine::lanes() const { return kLanes; }

bool MpiEngine::reduces(DType dtype) const { return mpi_reduces(dtype); }

}  // namespace braid::collectives::mpi

namespace braid::collectives {

std::unique_ptr<Engine> make_mpi_engine(const BackendOptions& options) {
  return std::make_unique<mpi::MpiEngine>(options);
}

}  // namespace braid::collectives
