// The staging's blocks are not written again while a slower rank still has to read them (collectives/
// collectives/shm/staging_area.h: a rank writes chunk g + 2 into its block only once every rank is done with chunk g).
//
// Between two staged exchanges (allreduce, allgather, reduce_scatter, alltoall) the rule is implied: a rank
// reaches chunk g + 2 only after every rank's data of chunk g + 1 is in, and a rank publishes that only
// after it is done with chunk g. Broadcasts are where the rule alone holds the writer back: their readers
// wait for the root only, so the root runs two chunks ahead of a rank that has not started reading. Here
// rank 0 broadcasts twice, filling both of its blocks, and then starts each kind of staged op while the
// last rank has not yet come to read: the op's first write goes to the block of the first broadcast, and
// must wait for the late rank, or that rank reads the op's data as the broadcast's.
#include <chrono>
#include <thread>

#include "collectives/shm/staging_area.h"
#include "tensor/ops/shape_ops.h"
#include "tests/mp/support/mp_test.h"
#include "tests/mp/support/staging_groups.h"

using namespace braid;
using namespace braid::mp;

namespace {

constexpr std::chrono::milliseconds kLateBy{150};

enum class Kind { Broadcast, Allreduce, Allgather, ReduceScatter, Alltoall };

const char* name_of(Kind k) {
  switch (k) {
    case Kind::Broadcast: return "broadcast";
    case Kind::Allreduce: return "allreduce";
    case Kind::Allgather: return "allgather";
    case Kind::ReduceScatter: return "reduce_scatter";
    case Kind::Alltoall: return "alltoall";
  }
  return "?";
}

// Message owners for the alltoall's piece from rank `from` to rank `to`.
int piece_owner(int from, int to) { return 1000 + from * 64 + to; }

// One op of kind `k` after the broadcasts: started, and later checked against what it must hold.
struct LateOp {
  Kind kind;
  int rank;
  int ranks;
  TensorList buffers;  // the op's input (and output, in place) or its output
  Tensor input;

  std::shared_ptr<Work> start(ProcessGroup& pg) {
    switch (kind) {
      case Kind::Broadcast: {
        buffers = {message(7000, rank == 0 ? 0 : 500 + rank)};
        return pg.broadcast(buffers);
      }
      case Kind::Allreduce:
        buffers = {full({1000}, static_cast<double>(rank + 1), DType::Float32)};
        return pg.allreduce(buffers);
      case Kind::Allgather:
        input = message(1500, rank);
        buffers = {empty({1500 * int64_t{ranks}}, TensorOptions(DType::UInt8))};
        return pg.allgather_into_tensor(buffers[0], input);
      case Kind::ReduceScatter: {
        // Block b of rank r holds r + b: the sum of block b is ranks * b + ranks * (ranks - 1) / 2.
        input = empty({100 * int64_t{ranks}}, TensorOptions(DType::Float64));
        for (int64_t i = 0; i < input.numel(); ++i) input.data<double>()[i] = rank + static_cast<double>(i / 100);
        buffers = {empty({100}, TensorOptions(DType::Float64))};
        return pg.reduce_scatter_tensor(buffers[0], input);
      }
      case Kind::Alltoall: {
        std::vector<Tensor> pieces;
        for (int q = 0; q < ranks; ++q) pieces.push_back(message(700, piece_owner(rank, q)));
        input = cat(pieces);
        buffers = {empty({700 * int64_t{ranks}}, TensorOptions(DType::UInt8))};
        return pg.alltoall_single(buffers[0], input, {}, {});
      }
    }
    return nullptr;
  }

  void check() const {
    const Tensor& out = buffers[0];
    switch (kind) {
      case Kind::Broadcast:
        CHECK(mismatches(out, 0) == 0);
        break;
      case Kind::Allreduce:
        CHECK_THAT(out, Equals(full({1000}, ranks * (ranks + 1) / 2.0, DType::Float32)));
        break;
      case Kind::Allgather:
        for (int r = 0; r < ranks; ++r) CHECK(mismatches(out.narrow(0, r * 1500, 1500), r) == 0);
        break;
      case Kind::ReduceScatter:
        CHECK_THAT(out, Equals(full({100}, ranks * rank + ranks * (ranks - 1) / 2.0, DType::Float64)));
        break;
      case Kind::Alltoall:
        for (int r = 0; r < ranks; ++r) CHECK(mismatches(out.narrow(0, r * 700, 700), piece_owner(r, rank)) == 0);
        break;
    }
  }
};

}  // namespace

TEST_CASE_METHOD(MpFixture, "shared-memory staging: no op writes over a broadcast's block that a late rank still reads",
                 "[shared][broadcast][allreduce][allgather][reduce_scatter][alltoall]") {
  if (!supports_cpu() || size() < 2) return;
  // One lane, so that the broadcasts and the op take turns on the same two blocks.
  auto pg = make_group(staging_options(/*threads=*/1));
  const auto q = shm_counts(pg);
  const int late = size() - 1;
  for (Kind kind : {Kind::Broadcast, Kind::Allreduce, Kind::Allgather, Kind::ReduceScatter, Kind::Alltoall}) {
    INFO("two broadcasts from rank 0, then a staged " << name_of(kind) << ", rank " << late << " late by "
                                                      << kLateBy.count() << " ms");
    finish(pg->barrier());
    if (rank() == late) std::this_thread::sleep_for(kLateBy);
    // Sizes that differ from the op's, so that a block written over also fails the reader's size check.
    std::vector<TensorList> broadcasts = {{message(3000, rank() == 0 ? 0 : 500 + rank())},
                                          {message(5000, rank() == 0 ? 1 : 500 + rank())}};
    std::vector<std::shared_ptr<Work>> works;
    for (auto& b : broadcasts) works.push_back(pg->broadcast(b));
    LateOp op{kind, rank(), size(), {}, {}};
    works.push_back(op.start(*pg));
    for (auto& w : works) finish(w);
    CHECK(mismatches(broadcasts[0][0], 0) == 0);
    CHECK(mismatches(broadcasts[1][0], 1) == 0);
    op.check();
  }
  // Every op above went through the staging.
  CHECK(q.shared_broadcasts() == 11);
  CHECK(q.staged_allreduces() == 1);
  CHECK(q.staged_allgathers() == 1);
  CHECK(q.staged_reduce_scatters() == 1);
  CHECK(q.staged_alltoalls() == 1);
  CHECK(q.staged_barriers() == 5);
}
