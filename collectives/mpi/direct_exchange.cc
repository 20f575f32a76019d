// DirectExchange (direct_exchange.h): allreduce, allgather, reduce_scatter and alltoall as one exchange of
// blocks between every pair of ranks.
#include "collectives/mpi/direct_exchange.h"

#include <fmt/format.h>

#include <tuple>
#include <utility>

#include "base/check.h"
#include "base/copy_bytes.h"
#include "collectives/mpi/mpi_p2p.h"
#include "collectives/mpi/mpi_runtime.h"
#include "collectives/mpi/mpi_types.h"
#include "collectives/mpi/mpi_wait.h"
#include "collectives/queue/op_queue.h"

namespace braid::collectives::mpi {

namespace {

// The exchanges' point-to-point tag on the lane's communicator. Open MPI's collectives use negative tags,
// so no collective message can match it; ops on a lane run in order, and MPI keeps messages between two
// ranks with one tag in order, so each op's receives match its own sends.
constexpr int kExchangeTag = 1;

void* ptr(const Tensor& t) { return t.defined() && t.numel() > 0 ? t.data_ptr() : nullptr; }

// What one rank exchanges with one peer in a direct exchange: `count` elements at `at` (none when 0).
struct Part {
  const void* at;
  int64_t count;
};

// The requests of one direct exchange, and what each receive must bring: MPI completes a receive with a
// shorter message than posted without complaint (a longer one fails as truncated), so a rank that sent
// fewer elements than its receiver expects would leave the rest of the receiver's slot unwritten.
struct ExchangeRequests {
  struct Receive {
    size_t request;  // index in `requests`
    int from;
    int64_t count;
  };
  std::vector<MPI_Request> requests;
  std::vector<Receive> receives;
  MPI_Datatype type = MPI_DATATYPE_NULL;
};

// Posts, for i = 1 .. p-1, the receive from rank r-i and the send to rank r+i (so that not every rank
// sends to rank 0 first), on the exchanges' tag; parts of no elements are skipped.
template <class RecvFrom, class SendTo>
void post_exchange(ExchangeRequests& ex, int rank, int size, MPI_Datatype type, MPI_Comm comm,
                   const std::string& what, RecvFrom&& recv_from, SendTo&& send_to) {
  ex.type = type;
  for (int i = 1; i < size; ++i) {
    const int from = (rank - i + size) % size;
    const int to = (rank + i) % size;
    const Part in = recv_from(from);
    if (in.count > 0) {
      ex.receives.push_back({ex.requests.size(), from, in.count});
      check_mpi(MPI_Irecv(const_cast<void*>(in.at), mpi_count(in.count, what), type, from, kExchangeTag, comm,
                          &ex.requests.emplace_back(MPI_REQUEST_NULL)),
                "MPI_Irecv", what);
    }
    const Part out = send_to(to);
    if (out.count > 0) {
      check_mpi(MPI_Isend(out.at, mpi_count(out.count, what), type, to, kExchangeTag, comm,
                          &ex.requests.emplace_back(MPI_REQUEST_NULL)),
                "MPI_Isend", what);
    }
  }
}

// After every request of `ex` completed with `statuses`: throws CommError when a peer sent fewer elements
// than this rank posted for it.
void check_received(const ExchangeRequests& ex, const std::vector<MPI_Status>& statuses, const std::string& what) {
  for (const auto& r : ex.receives) {
    int got = 0;
    check_mpi(MPI_Get_count(&statuses[r.request], ex.type, &got), "MPI_Get_count", what);
    if (got != r.count) {
      BRAID_THROW(CommError, "{}: invalid tensor size: rank {} sent {} elements, this rank expects {}", what, r.from,
                  got, r.count);
    }
  }
}

// out = block_of(0) op block_of(1) op ... op block_of(size-1), in rank order on every rank, so that
// every rank computes the same bits (MPI_Reduce_local: every op and dtype as MPI reduces them).
template <class BlockOf>
void reduce_in_rank_order(char* out, BlockOf&& block_of, int size, int n, size_t bytes, MPI_Datatype type,
                          MPI_Op op, const std::string& what) {
  copy_bytes(out, block_of(0), bytes);
  for (int r = 1; r < size; ++r) {
    check_mpi(MPI_Reduce_local(block_of(r), out, n, type, op), "MPI_Reduce_local", what);
  }
}

}  // namespace

DirectExchange::DirectExchange(int rank, int size, MpiP2p& p2p) : rank_(rank), size_(size), p2p_(p2p) {}

template <class Post>
void DirectExchange::run_exchange(const char* op, const OpContext& ctx, size_t bytes, std::any keep, Post&& post) {
  const auto started = Clock::now();
  ExchangeRequests ex;
  ex.requests.reserve(2 * static_cast<size_t>(size_ - 1));
  ex.receives.reserve(static_cast<size_t>(size_ - 1));
  // Everything posted stays reachable by MPI until it completes: on any failure the requests go to the
  // progress thread with the tensors, as after a timeout.
  const auto abandon = [&] {
    for (MPI_Request r : ex.requests) {
      if (r != MPI_REQUEST_NULL) p2p_.adopt_abandoned(r, keep);
    }
  };
  try {
    post(ex);
    std::vector<MPI_Status> statuses(ex.requests.size());
    if (test_all_until(ex.requests, bytes, ctx.deadline, ctx.what, OpQueue::on_waiting_thread(), statuses.data())) {
      check_received(ex, statuses, ctx.what);
      return;
    }
  } catch (...) {
    abandon();
    throw;
  }
  abandon();
  BRAID_THROW(TimeoutError, "{}'s exchange with {} ranks ({} bytes) still incomplete after {:.0f} ms", op, size_ - 1,
              bytes, elapsed_ms(started));
}

// Every rank sends its whole buffer to every other rank and receives theirs, then reduces the p buffers
// in rank order with MPI_Reduce_local (every op and dtype as MPI reduces them): one step instead of
// log2(p), and every rank computes the same sum in the same order, so all hold the same bits.
void DirectExchange::allreduce(Tensor& buffer, MPI_Op mpi_op, MPI_Comm comm, const OpContext& ctx) {
  const int n = mpi_count(buffer.numel(), ctx.what);
  const size_t bytes = buffer.nbytes();
  const MPI_Datatype type = mpi_reduce_type(buffer.dtype());
  char* mine = static_cast<char*>(ptr(buffer));
  // Every rank's buffer, rank-major: the p-1 received ones and this rank's own.
  Tensor copies = Tensor::empty({buffer.numel() * size_}, TensorOptions(buffer.dtype(), buffer.device()));
  char* of_rank = static_cast<char*>(copies.data_ptr());
  const auto slot = [&](int r) { return of_rank + static_cast<size_t>(r) * bytes; };
  run_exchange("allreduce", ctx, bytes * static_cast<size_t>(size_), std::make_pair(buffer, copies),
               [&](ExchangeRequests& rs) {
                 post_exchange(
                     rs, rank_, size_, type, comm, ctx.what, [&](int from) { return Part{slot(from), n}; },
                     [&](int) { return Part{mine, n}; });
                 copy_bytes(slot(rank_), mine, bytes);
               });
  reduce_in_rank_order(mine, slot, size_, n, bytes, type, mpi_op, ctx.what);
}

// Every rank sends its block straight to every other rank and receives theirs into its slots of the
// output, all posted at once, and copies its own block while they move. libnbc's MPI_Iallgather copies
// the block before it posts anything and costs more besides: against coll/tuned's blocking MPI_Allgather
// on the 2-core VM (2 ranks, paired rounds) it took 1.12x at 4 KiB, 1.76x at 64 KiB, 5.5x at 256 KiB and
// 1.4x at 1 MiB, where this exchange took 0.96x, 0.99x, 1.01x and 0.99x (4 ranks, 2 per core: 0.77x at
// 64 KiB, 0.92x at 1 MiB; 16 MiB on 2 ranks 0.99x). Each rank receives and sends (p-1) blocks, as in a
// ring, but in one step.
void DirectExchange::allgather(const Tensor& input, Tensor& output, bool in_place, MPI_Comm comm,
                               const OpContext& ctx) {
  const int n = mpi_count(input.numel(), ctx.what);
  const size_t block = input.nbytes();
  const MPI_Datatype type = mpi_move_type(input.dtype());
  char* out = static_cast<char*>(ptr(output));
  const void* mine = in_place ? out + static_cast<size_t>(rank_) * block : ptr(input);
  run_exchange("allgather", ctx, output.nbytes(), std::make_pair(input, output), [&](ExchangeRequests& rs) {
    post_exchange(
        rs, rank_, size_, type, comm, ctx.what,
        [&](int from) { return Part{out + static_cast<size_t>(from) * block, n}; }, [&](int) { return Part{mine, n}; });
    if (!in_place) copy_bytes(out + static_cast<size_t>(rank_) * block, ptr(input), block);
  });
}

// Every rank sends each other rank that rank's block of its input and receives the p-1 copies of its own
// block, all posted at once; it then reduces the p copies in rank order (MPI_Reduce_local, so every op and
// dtype is reduced as MPI_Reduce_scatter_block would). Each rank sends and receives (p-1)/p of the input,
// as in a ring, in one step instead of libnbc's rounds.
void DirectExchange::reduce_scatter(const Tensor& input, Tensor& output, MPI_Op mpi_op, MPI_Comm comm,
                                    const OpContext& ctx) {
  const int n = mpi_count(output.numel(), ctx.what);
  const size_t block = output.nbytes();
  const MPI_Datatype type = mpi_reduce_type(output.dtype());
  const auto* in = static_cast<const char*>(ptr(input));
  // The copies of this rank's block from ranks 0..p-1 in order, this rank's own slot unused.
  Tensor copies = Tensor::empty({output.numel() * size_}, TensorOptions(output.dtype(), output.device()));
  char* from_rank = static_cast<char*>(copies.data_ptr());
  run_exchange("reduce_scatter", ctx, input.nbytes(), std::make_tuple(input, output, copies),
               [&](ExchangeRequests& rs) {
                 post_exchange(
                     rs, rank_, size_, type, comm, ctx.what,
                     [&](int from) { return Part{from_rank + static_cast<size_t>(from) * block, n}; },
                     [&](int to) { return Part{in + static_cast<size_t>(to) * block, n}; });
               });
  const auto block_of = [&](int r) -> const void* {
    return r == rank_ ? in + static_cast<size_t>(r) * block : from_rank + static_cast<size_t>(r) * block;
  };
  reduce_in_rank_order(static_cast<char*>(ptr(output)), block_of, size_, n, block, type, mpi_op, ctx.what);
}

// Every rank posts its receive from and its send to every other rank at once and copies its own block
// while they move: what libnbc's MPI_Ialltoall(v) does in one round, minus its schedule. Against coll/
// tuned's blocking MPI_Alltoall (braid bench collectives, paired medians of 9-11 rounds, libnbc -> this):
// 2 ranks 4 KiB 3.8x -> 3.3x (+1.7 -> +1.3 us), 64 KiB 1.44x -> 1.22x, 1 MiB 1.07-1.08x -> 1.05-1.06x,
// 4 MiB 1.04-1.06x -> 1.03x; 4 ranks 64 KiB 1.22x -> 1.17x, 1 MiB 1.04-1.07x -> 1.03-1.07x, 16 MiB
// 1.05-1.07x -> 1.03-1.11x (within the noise). A rank's block for itself must not be larger than the one
// it expects from itself (MPI's truncation rule).
void DirectExchange::alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                              const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& recv_counts,
                              const std::vector<int64_t>& recv_offsets, MPI_Comm comm, const OpContext& ctx) {
  const MPI_Datatype type = mpi_move_type(input.dtype());
  const size_t element = input.element_size();
  const auto* in = static_cast<const char*>(ptr(input));
  char* out = static_cast<char*>(ptr(output));
  const auto at = [](const std::vector<int64_t>& v, int r) { return v[static_cast<size_t>(r)]; };
  const int64_t own = at(send_counts, rank_);
  if (own > at(recv_counts, rank_)) {
    BRAID_THROW(CommError, "{}: message truncated: this rank sends itself {} elements but expects {}", ctx.what, own,
                at(recv_counts, rank_));
  }
  run_exchange("alltoall", ctx, std::max(input.nbytes(), output.nbytes()), std::make_pair(input, output),
               [&](ExchangeRequests& rs) {
                 post_exchange(
                     rs, rank_, size_, type, comm, ctx.what,
                     [&](int from) {
                       return Part{out + static_cast<size_t>(at(recv_offsets, from)) * element, at(recv_counts, from)};
                     },
                     [&](int to) {
                       return Part{in + static_cast<size_t>(at(send_offsets, to)) * element, at(send_counts, to)};
                     });
                 if (own > 0) {
                   copy_bytes(out + static_cast<size_t>(at(recv_offsets, rank_)) * element,
                              in + static_cast<size_t>(at(send_offsets, rank_)) * element,
                              static_cast<size_t>(own) * element);
                 }
               });
}

}  // namespace braid::collectives::mpi
