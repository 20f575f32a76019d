// Broadcast and allreduce through the shared-memory engine's staging area (collectives/shm/staging_area.h,
// broadcast.h, allreduce.h): exact results for sizes around the staging chunk (every root; float32 and
// float64, SUM and AVG), the path really taken (the engine's counters, ShmCounts) on every engine that allows it (the groups here stage every size), many ops in
// flight on every lane mixed with the engine's, the engine taking over above the maximum and for what the
// staging does not reduce, and size mismatches named. The timeout cases are in timeout_test.cc.
#include "collectives/shm/staging_area.h"
#include "tests/mp/support/mp_test.h"
#include "tests/mp/support/staging_groups.h"

using namespace braid;
using namespace braid::mp;
using Catch::Contains;

namespace {

constexpr int64_t kChunk = static_cast<int64_t>(collectives::shm::kStagingChunkBytes);


}  // namespace

TEST_CASE_METHOD(MpFixture, "shared-memory broadcast: sizes around the staging chunk, every root",
                 "[broadcast][shared]") {
  if (!supports_cpu() || size() < 2) return;
  auto pg = make_group(staging_options());
  const auto q = shm_counts(pg);
  for (int64_t bytes : {int64_t{1}, int64_t{4096}, kChunk - 1, kChunk, kChunk + 1, 3 * kChunk + 12}) {
    for (int root = 0; root < size(); ++root) {
      INFO(bytes << " bytes from root " << root);
      TensorList xs{message(bytes, rank() == root ? root : size() + rank())};
      collectives::BroadcastOptions o;
      o.root_rank = root;
      const uint64_t before = q.shared_broadcasts();
      finish(pg->broadcast(xs, o));
      CHECK(q.shared_broadcasts() == before + 1);
      CHECK(mismatches(xs[0], root) == 0);
    }
  }
  // Non-contiguous, float and bool tensors are staged into a flat buffer first and come back as such.
  Tensor wide = zeros({4, 2}, DType::Float32);
  if (rank() == 1) wide.select(1, 0).copy_(floats({1.5, -2.0, 3.25, 4.0}));
  TensorList ws{wide.select(1, 0)};
  collectives::BroadcastOptions from1;
  from1.root_rank = 1;
  finish(pg->broadcast(ws, from1));
  CHECK_THAT(wide.select(1, 0), Equals(floats({1.5, -2.0, 3.25, 4.0})));
  CHECK_THAT(wide.select(1, 1), Equals(zeros({4}, DType::Float32)));
  TensorList bs{rank() == 1 ? ints({1, 0, 1}, DType::Bool) : zeros({3}, DType::Bool)};
  finish(pg->broadcast(bs, from1));
  CHECK_THAT(bs[0], Equals(ints({1, 0, 1}, DType::Bool)));
}

TEST_CASE_METHOD(MpFixture, "shared-memory staging: many ops in flight on every lane, mixed with the engine's",
                 "[broadcast][allreduce][shared][lanes][stress]") {
  if (!supports_cpu() || size() < 2) return;
  // Up to 64 KiB through shared memory; the 256 KiB broadcasts and the int64 allreduces go to the engine
  // on the same lanes, in between.
  auto pg = make_group(staging_options(8, 64 * 1024));
  const auto q = shm_counts(pg);
  constexpr int kOps = 96;
  std::vector<TensorList> broadcasts, sums, int_sums;
  std::vector<std::shared_ptr<Work>> works;
  int shared = 0;
  for (int i = 0; i < kOps; ++i) {
    const int root = (i * 5) % size();
    const int64_t bytes = i % 3 == 2 ? kChunk : 1000 + 677 * i;  // 256 KiB, or 1000 B .. 64 KiB
    shared += bytes <= 64 * 1024;
    broadcasts.push_back({message(bytes, rank() == root ? root : size() + rank())});
    collectives::BroadcastOptions o;
    o.root_rank = root;
    works.push_back(pg->broadcast(broadcasts.back(), o));
    sums.push_back({full({33 + 1000 * (i % 7)}, static_cast<double>(rank() + i))});
    works.push_back(pg->allreduce(sums.back()));
    int_sums.push_back({full({5}, rank() + i, TensorOptions(DType::Int64))});
    works.push_back(pg->allreduce(int_sums.back()));
  }
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait(Millis(60'000));
  for (int i = 0; i < kOps; ++i) {
    INFO("op " << i);
    CHECK(mismatches(broadcasts[static_cast<size_t>(i)][0], (i * 5) % size()) == 0);
    const double want = size() * (size() - 1) / 2.0 + static_cast<double>(size()) * i;
    CHECK_THAT(sums[static_cast<size_t>(i)][0], Equals(full({33 + 1000 * (i % 7)}, want)));
    CHECK_THAT(int_sums[static_cast<size_t>(i)][0], Equals(full({5}, want, TensorOptions(DType::Int64))));
  }
  CHECK(q.shared_broadcasts() == static_cast<uint64_t>(shared));
  CHECK(q.staged_allreduces() == static_cast<uint64_t>(kOps));
}

TEST_CASE_METHOD(MpFixture, "shared-memory staging: the engine's above the maximum and when it is 0",
                 "[broadcast][allreduce][shared]") {
  if (!supports_cpu() || size() < 2) return;
  for (int64_t max : {int64_t{0}, int64_t{4096}}) {
    INFO("maximum " << max);
    auto pg = make_group(staging_options(2, max));
    TensorList xs{message(4097, rank())};
    finish(pg->broadcast(xs));
    CHECK(mismatches(xs[0], 0) == 0);
    TensorList ys{full({1025}, 1.0)};
    finish(pg->allreduce(ys));
    CHECK_THAT(ys[0], Equals(full({1025}, static_cast<double>(size()))));
    CHECK(shm_counts(pg).shared_broadcasts() == 0);
    CHECK(shm_counts(pg).staged_allreduces() == 0);
  }
}

TEST_CASE_METHOD(MpFixture, "shared-memory broadcast: a rank expecting another size fails, naming both sizes",
                 "[broadcast][shared][checks]") {
  if (!supports_cpu() || size() < 2) return;
  auto pg = make_group(staging_options());
  const int odd = size() - 1;
  TensorList xs{message(rank() == odd ? 200 : 100, rank())};
  auto w = pg->broadcast(xs);
  if (rank() == odd) {
    CHECK_THROWS_WITH(w->wait(Millis(60'000)), Contains("invalid tensor size") && Contains("broadcasts 100 bytes") &&
                                                   Contains(fmt::format("rank {} expects 200", odd)));
  } else {
    w->wait(Millis(60'000));
    CHECK(mismatches(xs[0], 0) == 0);
  }
  sync("mismatch-seen");
}

TEST_CASE_METHOD(MpFixture, "staged allreduce: sizes around the staging chunk, float32 and float64, SUM and AVG",
                 "[allreduce][shared]") {
  if (!supports_cpu() || size() < 2) return;
  auto pg = make_group(staging_options());
  const auto q = shm_counts(pg);
  for (DType dt : {DType::Float32, DType::Float64}) {
    const auto per_chunk = static_cast<int64_t>(collectives::shm::kStagingChunkBytes / element_size(dt));
    for (int64_t n : {int64_t{1}, int64_t{15}, per_chunk - 1, per_chunk, per_chunk + 1, 3 * per_chunk + 5}) {
      for (auto kind : {collectives::ReduceOp::SUM, collectives::ReduceOp::AVG}) {
        INFO(dtype_name(dt) << " x " << n << (kind == collectives::ReduceOp::SUM ? " SUM" : " AVG"));
        // Small integers, exact in any order: rank r contributes (i % 13) + r at i.
        Tensor x = empty({n}, TensorOptions(dt));
        Tensor want = empty({n}, TensorOptions(DType::Float64));
        for (int64_t i = 0; i < n; ++i) {
          const double mine = static_cast<double>(i % 13 + rank());
          const double sum = static_cast<double>(size() * (i % 13)) + size() * (size() - 1) / 2.0;
          if (dt == DType::Float32) x.data<float>()[i] = static_cast<float>(mine);
          else x.data<double>()[i] = mine;
          want.data<double>()[i] = kind == collectives::ReduceOp::SUM ? sum : sum / size();
        }
        TensorList xs{x};
        collectives::AllreduceOptions o;
        o.reduce_op = collectives::ReduceOp(kind);
        const uint64_t before = q.staged_allreduces();
        finish(pg->allreduce(xs, o));
        CHECK(q.staged_allreduces() == before + 1);
        CHECK(allclose(xs[0].to(DType::Float64), want, 1e-6, 0));
      }
    }
  }
  // A non-contiguous view is packed first and written back in place.
  Tensor wide = zeros({6, 2}, DType::Float32);
  wide.select(1, 1).fill_(static_cast<double>(rank() + 1));
  TensorList vs{wide.select(1, 1)};
  finish(pg->allreduce(vs));
  CHECK_THAT(wide.select(1, 1), Equals(full({6}, size() * (size() + 1) / 2.0)));
  CHECK_THAT(wide.select(1, 0), Equals(zeros({6}, DType::Float32)));
}

TEST_CASE_METHOD(MpFixture, "staged allreduce: ranks with other sizes all fail, naming the sizes",
                 "[allreduce][shared][checks]") {
  if (!supports_cpu() || size() < 2) return;
  auto pg = make_group(staging_options());
  const int odd = size() - 1;
  TensorList xs{full({rank() == odd ? 50 : 25}, 1.0)};
  CHECK_THROWS_WITH(pg->allreduce(xs)->wait(Millis(60'000)),
                    Contains("invalid tensor size") && Contains(fmt::format("rank {} reduces 200 bytes", odd)) &&
                        Contains("reduces 100"));
  sync("mismatch-seen");
}
