// Allgather, alltoall, reduce_scatter and barrier through the shared-memory engine's staging area
// (collectives/shm/allgather.h, alltoall.h, reduce_scatter.h, barrier.h): exact results for
// sizes around the staging chunk and the slots, in place, uneven and empty pieces, lists of float tensors;
// a barrier that holds every rank until the last arrives; the path really taken (the shared-memory
// engine's counters, ShmCounts in tests/mp/support/staging_groups.h) on every engine that
// allows it (the groups here stage every size, on gloo and on mpi);
// the engine for every rank when any rank's input is above the maximum, without a wait on the rank that
// knows it; many ops in flight on every lane;
// size mismatches failing every rank alike. The timeout cases are in timeout_test.cc.
#include <chrono>
#include <functional>
#include <numeric>
#include <thread>

#include "collectives/shm/staging_area.h"
#include "collectives/shm/alltoall.h"
#include "tensor/ops/shape_ops.h"
#include "tests/mp/support/mp_test.h"
#include "tests/mp/support/staging_groups.h"

using namespace braid;
using namespace braid::mp;
using Catch::Contains;

namespace {

constexpr int64_t kChunk = static_cast<int64_t>(collectives::shm::kStagingChunkBytes);

// Who owns rank `from`'s piece for rank `to` in an alltoall (a message owner for pattern()).
int piece_owner(int from, int to) { return from * 64 + to; }

// Rank `from`'s input: for every rank q, piece_bytes(from, q) bytes of piece_owner(from, q)'s message.
template <typename PieceBytes>
Tensor alltoall_input(int from, int ranks, PieceBytes piece_bytes) {
  std::vector<Tensor> pieces;
  for (int q = 0; q < ranks; ++q) pieces.push_back(message(piece_bytes(from, q), piece_owner(from, q)));
  return cat(pieces);
}

// How many bytes of rank `to`'s output differ from what every rank sent it.
template <typename PieceBytes>
int64_t alltoall_mismatches(const Tensor& out, int to, int ranks, PieceBytes piece_bytes) {
  int64_t wrong = 0;
  int64_t at = 0;
  for (int r = 0; r < ranks; ++r) {
    const int64_t n = piece_bytes(r, to);
    wrong += mismatches(out.narrow(0, at, n), piece_owner(r, to));
    at += n;
  }
  return wrong + (at != out.numel() ? 1 : 0);
}

std::vector<int64_t> splits_from(int from, int ranks, const std::function<int64_t(int, int)>& piece_bytes) {
  std::vector<int64_t> s;
  for (int q = 0; q < ranks; ++q) s.push_back(piece_bytes(from, q));
  return s;
}

std::vector<int64_t> splits_to(int to, int ranks, const std::function<int64_t(int, int)>& piece_bytes) {
  std::vector<int64_t> s;
  for (int r = 0; r < ranks; ++r) s.push_back(piece_bytes(r, to));
  return s;
}

// Starts an alltoall_single of uint8 pieces of piece_bytes(from, to) bytes into `out`, sized here.
std::shared_ptr<Work> start_alltoall(const std::shared_ptr<ProcessGroup>& pg, int rank, int ranks,
                                     const std::function<int64_t(int, int)>& piece_bytes, Tensor& out) {
  Tensor in = alltoall_input(rank, ranks, piece_bytes);
  const auto in_splits = splits_from(rank, ranks, piece_bytes);
  const auto out_splits = splits_to(rank, ranks, piece_bytes);
  out = empty({std::accumulate(out_splits.begin(), out_splits.end(), int64_t{0})}, TensorOptions(DType::UInt8));
  return pg->alltoall_single(out, in, out_splits, in_splits);
}

// Rank r's input value at element i of block b of a reduce_scatter: small integers, exact in any order.
double scatter_value(int64_t i, int b, int r) { return static_cast<double>(i % 13 + r + 2 * b); }

// The sum over `ranks` ranks of their values at element i of block b.
double scatter_sum(int64_t i, int b, int ranks) {
  return static_cast<double>(ranks * (i % 13 + 2 * b)) + ranks * (ranks - 1) / 2.0;
}

// Rank `r`'s reduce_scatter input: `ranks` blocks of n elements of `dt`.
Tensor scatter_input(int64_t n, int ranks, int r, DType dt) {
  Tensor x = empty({n * ranks}, TensorOptions(DType::Float64));
  for (int b = 0; b < ranks; ++b) {
    for (int64_t i = 0; i < n; ++i) x.data<double>()[b * n + i] = scatter_value(i, b, r);
  }
  return x.to(dt);
}

// Whether `out` holds block `b`'s sum over `ranks` ranks (divided by `divisor`).
bool is_scatter_sum(const Tensor& out, int b, int ranks, double divisor = 1.0) {
  const Tensor d = out.to(DType::Float64).contiguous();
  for (int64_t i = 0; i < d.numel(); ++i) {
    if (d.data<double>()[i] != scatter_sum(i, b, ranks) / divisor) return false;
  }
  return true;
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "staged allgather: sizes around the staging chunk, in place and not",
                 "[allgather][shared]") {
  if (!supports_cpu() || size() < 2) return;
  auto pg = make_group(staging_options());
  const auto q = shm_counts(pg);
  for (int64_t bytes : {int64_t{1}, int64_t{4096}, kChunk - 1, kChunk, kChunk + 1, 3 * kChunk + 12}) {
    for (bool in_place : {false, true}) {
      INFO(bytes << " bytes" << (in_place ? ", in place" : ""));
      Tensor out = full({bytes * size()}, 0xee, TensorOptions(DType::UInt8));
      Tensor in = message(bytes, rank());
      if (in_place) {
        out.narrow(0, rank() * bytes, bytes).copy_(in);
        in = out.narrow(0, rank() * bytes, bytes);
      }
      const uint64_t before = q.staged_allgathers();
      finish(pg->allgather_into_tensor(out, in));
      CHECK(q.staged_allgathers() == before + 1);
      for (int r = 0; r < size(); ++r) CHECK(mismatches(out.narrow(0, r * bytes, bytes), r) == 0);
    }
  }
  // The list form, float and non-contiguous tensors: packed into a flat buffer first and unpacked after.
  TensorList ins{column_view(full({3}, rank() + 0.5, DType::Float64))};
  std::vector<TensorList> outs(1);
  for (int r = 0; r < size(); ++r) outs[0].push_back(zeros({3}, DType::Float64));
  finish(pg->allgather(outs, ins));
  for (int r = 0; r < size(); ++r) {
    CHECK_THAT(outs[0][static_cast<size_t>(r)], Equals(full({3}, r + 0.5, DType::Float64)));
  }
}

TEST_CASE_METHOD(MpFixture, "staged alltoall: pieces around the slot, equal splits", "[alltoall][shared]") {
  if (!supports_cpu() || size() < 2) return;
  auto pg = make_group(staging_options());
  const auto q = shm_counts(pg);
  const int64_t slot = collectives::shm::staged_alltoall_slot_bytes(size());
  for (int64_t piece : {int64_t{1}, int64_t{4096}, slot - 1, slot, slot + 1, 3 * slot + 5}) {
    INFO(piece << " bytes per piece (slot " << slot << ")");
    const auto bytes = [piece](int, int) { return piece; };
    Tensor in = alltoall_input(rank(), size(), bytes);
    Tensor out = empty({piece * size()}, TensorOptions(DType::UInt8));
    const uint64_t before = q.staged_alltoalls();
    finish(pg->alltoall_single(out, in, {}, {}));
    CHECK(q.staged_alltoalls() == before + 1);
    CHECK(alltoall_mismatches(out, rank(), size(), bytes) == 0);
  }
}

TEST_CASE_METHOD(MpFixture, "staged alltoall: uneven and empty pieces, lists of float tensors",
                 "[alltoall][shared]") {
  if (!supports_cpu() || size() < 2) return;
  auto pg = make_group(staging_options());
  const auto q = shm_counts(pg);
  const int64_t slot = collectives::shm::staged_alltoall_slot_bytes(size());
  // Zero, a few bytes, a piece over a slot and one over two: the op runs as many chunks as the largest
  // piece of any rank needs, also on the ranks whose own pieces are small or empty.
  const std::function<int64_t(int, int)> uneven = [slot](int from, int to) {
    const int64_t sizes[] = {0, 5, slot + 3, 2 * slot + 1};
    return sizes[(from + 2 * to) % 4];
  };
  Tensor out;
  uint64_t before = q.staged_alltoalls();
  finish(start_alltoall(pg, rank(), size(), uneven, out));
  CHECK(q.staged_alltoalls() == before + 1);
  CHECK(alltoall_mismatches(out, rank(), size(), uneven) == 0);

  const std::function<int64_t(int, int)> nothing = [](int, int) { return int64_t{0}; };
  before = q.staged_alltoalls();
  finish(start_alltoall(pg, rank(), size(), nothing, out));
  CHECK(q.staged_alltoalls() == before + 1);
  CHECK(out.numel() == 0);

  // Rank r sends r + s + 1 float64s of value 10r + s to rank s.
  TensorList ins, outs;
  for (int s = 0; s < size(); ++s) {
    ins.push_back(full({rank() + s + 1}, 10.0 * rank() + s, DType::Float64));
    outs.push_back(zeros({s + rank() + 1}, DType::Float64));
  }
  finish(pg->alltoall(outs, ins));
  for (int s = 0; s < size(); ++s) {
    CHECK_THAT(outs[static_cast<size_t>(s)], Equals(full({s + rank() + 1}, 10.0 * s + rank(), DType::Float64)));
  }
}

TEST_CASE_METHOD(MpFixture, "staged reduce_scatter: sizes around the slot, float32 and float64, SUM and AVG, in place",
                 "[reduce_scatter][shared]") {
  if (!supports_cpu() || size() < 2) return;
  auto pg = make_group(staging_options());
  const auto q = shm_counts(pg);
  const int64_t slot = kChunk / size() / 64 * 64;
  for (DType dt : {DType::Float32, DType::Float64}) {
    const auto per_slot = slot / static_cast<int64_t>(element_size(dt));
    for (int64_t n : {int64_t{1}, int64_t{15}, per_slot - 1, per_slot, per_slot + 1, 3 * per_slot + 5}) {
      for (auto kind : {ReduceOp::SUM, ReduceOp::AVG}) {
        INFO(dtype_name(dt) << " x " << n << (kind == ReduceOp::SUM ? " SUM" : " AVG"));
        Tensor in = scatter_input(n, size(), rank(), dt);
        Tensor out = zeros({n}, dt);
        ReduceScatterOptions o;
        o.reduce_op = ReduceOp(kind);
        const uint64_t before = q.staged_reduce_scatters();
        finish(pg->reduce_scatter_tensor(out, in, o));
        CHECK(q.staged_reduce_scatters() == before + 1);
        CHECK(is_scatter_sum(out, rank(), size(), kind == ReduceOp::SUM ? 1.0 : size()));
      }
    }
  }
  // In place: the output is this rank's block of the input.
  Tensor in = scatter_input(3 * slot / 4 + 7, size(), rank(), DType::Float32);
  const int64_t n = in.numel() / size();
  Tensor out = in.narrow(0, rank() * n, n);
  finish(pg->reduce_scatter_tensor(out, in));
  CHECK(is_scatter_sum(out, rank(), size()));
  // The list form with a non-contiguous output; int64 goes to the engine.
  std::vector<TensorList> ins(1);
  for (int b = 0; b < size(); ++b) ins[0].push_back(scatter_input(4, 1, rank(), DType::Float64) + 2.0 * b);
  TensorList outs{column_view(zeros({4}, DType::Float64))};
  finish(pg->reduce_scatter(outs, ins));
  CHECK(is_scatter_sum(outs[0], rank(), size()));
  const uint64_t before = q.staged_reduce_scatters();
  Tensor ints_in = scatter_input(5, size(), rank(), DType::Int64);
  Tensor ints_out = zeros({5}, DType::Int64);
  finish(pg->reduce_scatter_tensor(ints_out, ints_in));
  CHECK(is_scatter_sum(ints_out, rank(), size()));
  CHECK(q.staged_reduce_scatters() == before);
}

TEST_CASE_METHOD(MpFixture, "staged barrier: every rank waits for the last to arrive", "[barrier][shared]") {
  if (!supports_cpu() || size() < 2) return;
  auto pg = make_group(staging_options());
  const auto q = shm_counts(pg);
  finish(pg->barrier());  // sets the staging up and lines the ranks up
  const int late = size() - 1;
  const auto t0 = std::chrono::steady_clock::now();
  if (rank() == late) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  finish(pg->barrier());
  const auto waited = std::chrono::steady_clock::now() - t0;
  // Every rank left the first barrier within a few ms of the others, so none leaves the second before the
  // late rank's 300 ms are nearly over.
  CHECK(waited >= std::chrono::milliseconds(200));
  CHECK(q.staged_barriers() == 2);
}

TEST_CASE_METHOD(MpFixture,
                 "staged allgather and alltoall: the engine's for every rank when one input is above the maximum",
                 "[allgather][alltoall][shared]") {
  if (!supports_cpu() || size() < 2) return;
  auto pg = make_group(staging_options(2, 4096));
  const auto q = shm_counts(pg);
  // Only rank 0's input is above 4096 bytes: the ranks learn it from each other's sizes and all leave the
  // op to the engine.
  const std::function<int64_t(int, int)> rank0_large = [](int from, int) { return from == 0 ? int64_t{3000} : 10; };
  Tensor out;
  finish(start_alltoall(pg, rank(), size(), rank0_large, out));
  CHECK(alltoall_mismatches(out, rank(), size(), rank0_large) == 0);
  CHECK(q.staged_alltoalls() == 0);
  const std::function<int64_t(int, int)> small = [](int from, int to) { return int64_t{from + to + 1}; };
  finish(start_alltoall(pg, rank(), size(), small, out));
  CHECK(alltoall_mismatches(out, rank(), size(), small) == 0);
  CHECK(q.staged_alltoalls() == 1);

  Tensor gathered = empty({4097 * int64_t{size()}}, TensorOptions(DType::UInt8));
  Tensor in = message(4097, rank());
  finish(pg->allgather_into_tensor(gathered, in));
  for (int r = 0; r < size(); ++r) CHECK(mismatches(gathered.narrow(0, r * 4097, 4097), r) == 0);
  CHECK(q.staged_allgathers() == 0);
}

TEST_CASE_METHOD(MpFixture, "staged alltoall: a rank whose input is above the maximum leaves without waiting",
                 "[alltoall][shared]") {
  if (!supports_cpu() || size() < 2) return;
  // The staging on its own (no engine): rank 0's input is above the maximum, so it knows the op goes to
  // the engine and only publishes its sizes; the others, late, learn it from them.
  auto staging = collectives::shm::StagingArea::create(*store(), "verdict/", rank(), size(), 1, Millis(60'000));
  REQUIRE(staging != nullptr);
  collectives::OpContext ctx;
  ctx.what = "staged alltoall test";
  ctx.deadline = Deadline::after(Millis(60'000));
  constexpr int64_t kMax = 4096;
  constexpr auto kLate = std::chrono::milliseconds(400);
  const auto staged = [&](const std::function<int64_t(int, int)>& piece_bytes, Tensor& out) {
    Tensor in = alltoall_input(rank(), size(), piece_bytes);
    const auto in_splits = splits_from(rank(), size(), piece_bytes);
    const auto out_splits = splits_to(rank(), size(), piece_bytes);
    std::vector<int64_t> in_at(in_splits.size(), 0);
    std::vector<int64_t> out_at(out_splits.size(), 0);
    std::exclusive_scan(in_splits.begin(), in_splits.end(), in_at.begin(), int64_t{0});
    std::exclusive_scan(out_splits.begin(), out_splits.end(), out_at.begin(), int64_t{0});
    out = zeros({std::accumulate(out_splits.begin(), out_splits.end(), int64_t{0})}, DType::UInt8);
    const collectives::shm::AlltoallPieces pieces{in_splits, in_at, out_splits, out_at, 1};
    return collectives::shm::staged_alltoall(*staging, in, out, pieces, kMax, ctx);
  };
  const std::function<int64_t(int, int)> rank0_large = [](int from, int) { return from == 0 ? kMax : int64_t{10}; };
  sync("verdict-start");
  if (rank() != 0) std::this_thread::sleep_for(kLate);
  const auto t0 = std::chrono::steady_clock::now();
  Tensor out;
  CHECK_FALSE(staged(rank0_large, out));
  if (rank() == 0) CHECK(std::chrono::steady_clock::now() - t0 < kLate / 2);
  // The lane's blocks and chunk count still agree on every rank: a staged op after it moves its data.
  const std::function<int64_t(int, int)> small = [](int from, int to) { return int64_t{from + 2 * to + 1}; };
  CHECK(staged(small, out));
  CHECK(alltoall_mismatches(out, rank(), size(), small) == 0);
  sync("verdict-end");
}

TEST_CASE_METHOD(MpFixture,
                 "staged allgather, alltoall and reduce_scatter: many ops in flight on every lane, among the engine's",
                 "[allgather][alltoall][broadcast][reduce_scatter][barrier][shared][lanes][stress]") {
  if (!supports_cpu() || size() < 2) return;
  // Up to 1 MiB through shared memory; larger ops go to the engine on the same lanes, in between. The
  // broadcasts between them wait for no rank but the root, so a rank may run a chunk ahead there: the
  // staged ops must still not overwrite a block that a slower rank reads.
  constexpr int64_t kMax = 1 << 20;
  auto pg = make_group(staging_options(8, kMax));
  const auto q = shm_counts(pg);
  constexpr int kOps = 48;
  std::vector<Tensor> gathered(kOps), exchanged(kOps);
  std::vector<TensorList> broadcasts;
  std::vector<Tensor> scattered(kOps);
  std::vector<std::function<int64_t(int, int)>> pieces;
  std::vector<std::shared_ptr<Work>> works;
  uint64_t staged_gathers = 0, staged_exchanges = 0, staged_scatters = 0;
  for (int i = 0; i < kOps; ++i) {
    // Inputs of a few bytes to a few chunks; every fifth output is over the maximum.
    const int64_t bytes = i % 5 == 4 ? kMax : i % 5 == 2 ? kMax / size() : 100 + 397 * i;
    gathered[static_cast<size_t>(i)] = empty({bytes * size()}, TensorOptions(DType::UInt8));
    Tensor in = message(bytes, rank());
    works.push_back(pg->allgather_into_tensor(gathered[static_cast<size_t>(i)], in));
    staged_gathers += bytes * size() <= kMax;
    const int root = i % size();
    broadcasts.push_back({message(i % 3 == 0 ? 2 * kChunk + 5 : 3000 + i, rank() == root ? root : size() + rank())});
    BroadcastOptions o;
    o.root_rank = root;
    works.push_back(pg->broadcast(broadcasts.back(), o));
    // float64 blocks of up to a few slots; every sixth input over the maximum.
    const int64_t n = i % 6 == 5 ? kMax / 8 / size() + 1 : 1 + (i * 997) % 20'000;
    Tensor scatter_in = scatter_input(n, size(), rank(), DType::Float64);
    scattered[static_cast<size_t>(i)] = empty({n}, TensorOptions(DType::Float64));
    works.push_back(pg->reduce_scatter_tensor(scattered[static_cast<size_t>(i)], scatter_in));
    staged_scatters += n * 8 * size() <= kMax;
    // Pieces within one slot, pieces over two (in range on any rank count), and every fourth alltoall's
    // inputs over the maximum.
    pieces.emplace_back([i, slot = collectives::shm::staged_alltoall_slot_bytes(size())](int from, int to) {
      const int64_t small = (i * 211 + from * 37 + to * 101) % 9000;
      return i % 4 == 3 ? kMax / 2 + small : i % 4 == 1 ? 2 * slot + small : small;
    });
    works.push_back(start_alltoall(pg, rank(), size(), pieces.back(), exchanged[static_cast<size_t>(i)]));
    if (i % 8 == 7) works.push_back(pg->barrier());
    int64_t largest = 0;
    for (int r = 0; r < size(); ++r) {
      const auto s = splits_from(r, size(), pieces.back());
      largest = std::max(largest, std::accumulate(s.begin(), s.end(), int64_t{0}));
    }
    staged_exchanges += largest <= kMax;
  }
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait(Millis(60'000));
  for (int i = 0; i < kOps; ++i) {
    INFO("op " << i);
    const Tensor& g = gathered[static_cast<size_t>(i)];
    const int64_t bytes = g.numel() / size();
    for (int r = 0; r < size(); ++r) CHECK(mismatches(g.narrow(0, r * bytes, bytes), r) == 0);
    CHECK(mismatches(broadcasts[static_cast<size_t>(i)][0], i % size()) == 0);
    CHECK(is_scatter_sum(scattered[static_cast<size_t>(i)], rank(), size()));
    CHECK(alltoall_mismatches(exchanged[static_cast<size_t>(i)], rank(), size(), pieces[static_cast<size_t>(i)]) == 0);
  }
  CHECK(q.staged_allgathers() == staged_gathers);
  CHECK(q.staged_alltoalls() == staged_exchanges);
  CHECK(q.shared_broadcasts() == static_cast<uint64_t>(kOps));
  CHECK(q.staged_reduce_scatters() == staged_scatters);
  CHECK(q.staged_barriers() == static_cast<uint64_t>(kOps / 8));
  CHECK(staged_exchanges > 0);
  CHECK(staged_exchanges < static_cast<uint64_t>(kOps));
}

TEST_CASE_METHOD(MpFixture, "staged allgather, alltoall and reduce_scatter: ranks with other sizes all fail",
                 "[allgather][alltoall][reduce_scatter][shared][checks]") {
  if (!supports_cpu() || size() < 2) return;
  const int odd = size() - 1;
  {
    auto pg = make_group(staging_options());
    Tensor in = message(rank() == odd ? 16 : 8, rank());
    Tensor out = empty({in.numel() * size()}, TensorOptions(DType::UInt8));
    CHECK_THROWS_WITH(pg->allgather_into_tensor(out, in)->wait(Millis(60'000)),
                      Contains("invalid tensor size") && Contains("gathers 16 bytes") && Contains("gathers 8 bytes"));
  }
  sync("allgather-mismatch-seen");
  {
    // Rank `odd` sends 2 bytes to rank 0, which expects 1.
    auto pg = make_group(staging_options());
    const std::function<int64_t(int, int)> sends = [odd](int from, int to) {
      return from == odd && to == 0 ? int64_t{2} : int64_t{1};
    };
    Tensor in = alltoall_input(rank(), size(), sends);
    Tensor out = empty({size()}, TensorOptions(DType::UInt8));
    const std::vector<int64_t> ones(static_cast<size_t>(size()), 1);
    CHECK_THROWS_WITH(pg->alltoall_single(out, in, ones, splits_from(rank(), size(), sends))->wait(Millis(60'000)),
                      Contains("invalid tensor size") &&
                          Contains(fmt::format("rank {} sends 2 elements to rank 0, which expects 1", odd)));
  }
  sync("alltoall-mismatch-seen");
  {
    // Every rank sends itself 2 bytes but expects 1: every rank names rank 0, the first it checks.
    auto pg = make_group(staging_options());
    std::vector<int64_t> in_splits(static_cast<size_t>(size()), 1);
    in_splits[static_cast<size_t>(rank())] = 2;
    Tensor in = zeros({size() + 1}, DType::UInt8);
    Tensor out = zeros({size()}, DType::UInt8);
    const std::vector<int64_t> ones(static_cast<size_t>(size()), 1);
    CHECK_THROWS_WITH(pg->alltoall_single(out, in, ones, in_splits)->wait(Millis(60'000)),
                      Contains("invalid tensor size") && Contains("rank 0 sends itself 2 elements but expects 1"));
  }
  sync("alltoall-self-mismatch-seen");
  {
    auto pg = make_group(staging_options());
    const int64_t n = rank() == odd ? 2 : 1;
    Tensor in = zeros({n * size()}, DType::Float32);
    Tensor out = zeros({n}, DType::Float32);
    CHECK_THROWS_WITH(pg->reduce_scatter_tensor(out, in)->wait(Millis(60'000)),
                      Contains("invalid tensor size") && Contains(fmt::format("reduces {} bytes", 8 * size())) &&
                          Contains(fmt::format("reduces {} bytes", 4 * size())));
  }
  sync("reduce-scatter-mismatch-seen");
}
