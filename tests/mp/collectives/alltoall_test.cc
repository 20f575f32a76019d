// alltoall_single (equal and uneven splits with the results PyTorch 1.13 gives, empty blocks between some
// pairs) and alltoall (lists).
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using Catch::Contains;

TEST_CASE_METHOD(MpFixture, "alltoall_single: equal splits, input[k] = r*ws + k gives output[k] = k*ws + r", "[alltoall]") {
  auto pg = shared_group();
  const int ws = size();
  Tensor in = dev(arange(rank() * ws, (rank() + 1) * ws, 1, DType::Int64));
  Tensor out = dev(full({ws}, int64_t{-1}, DType::Int64));
  const TensorList value = finish(pg->alltoall_single(out, in, {}, {}));
  std::vector<int64_t> want;
  for (int k = 0; k < ws; ++k) want.push_back(k * ws + rank());
  CHECK_THAT(out, Equals(ints(want)));
  REQUIRE(value.size() == 1);
  CHECK(value[0].is_same(out));

  // Rows of a 2-D tensor move whole.
  Tensor in2 = dev(full({2 * ws, 3}, double(rank())));
  Tensor out2 = dev(zeros({2 * ws, 3}));
  finish(pg->alltoall_single(out2, in2, {}, {}));
  for (int k = 0; k < ws; ++k) CHECK_THAT(out2.narrow(0, 2 * k, 2).contiguous(), Equals(full({2, 3}, double(k))));
}

TEST_CASE_METHOD(MpFixture, "alltoall_single: uneven splits, rank r sends s+1 elements to rank s", "[alltoall]") {
  auto pg = shared_group();
  const int ws = size(), r = rank();
  // Element i of the block rank r sends to rank s is r*100 + s*10 + i.
  std::vector<int64_t> in_values, in_splits, out_splits, want;
  for (int s = 0; s < ws; ++s) {
    in_splits.push_back(s + 1);
    for (int i = 0; i <= s; ++i) in_values.push_back(r * 100 + s * 10 + i);
  }
  for (int s = 0; s < ws; ++s) {
    out_splits.push_back(r + 1);
    for (int i = 0; i <= r; ++i) want.push_back(s * 100 + r * 10 + i);
  }
  Tensor in = dev(ints(in_values));
  Tensor out = dev(full({static_cast<int64_t>(want.size())}, int64_t{-1}, DType::Int64));
  finish(pg->alltoall_single(out, in, out_splits, in_splits));
  CHECK_THAT(out, Equals(ints(want)));
}

TEST_CASE_METHOD(MpFixture, "alltoall_single: empty blocks between some pairs, its own block included", "[alltoall]") {
  auto pg = shared_group();
  const int ws = size(), r = rank();
  // Rank a sends (a + b) % 3 elements to rank b: some pairs (and some ranks' own blocks) exchange nothing.
  const auto count = [](int a, int b) { return (a + b) % 3; };
  std::vector<int64_t> in_values, in_splits, out_splits, want;
  for (int s = 0; s < ws; ++s) {
    in_splits.push_back(count(r, s));
    for (int i = 0; i < count(r, s); ++i) in_values.push_back(r * 100 + s * 10 + i);
    out_splits.push_back(count(s, r));
    for (int i = 0; i < count(s, r); ++i) want.push_back(s * 100 + r * 10 + i);
  }
  Tensor in = dev(in_values.empty() ? empty({0}, DType::Int64) : ints(in_values));
  Tensor out = dev(want.empty() ? empty({0}, DType::Int64)
                                : full({static_cast<int64_t>(want.size())}, int64_t{-1}, DType::Int64));
  finish(pg->alltoall_single(out, in, out_splits, in_splits));
  if (!want.empty()) CHECK_THAT(out, Equals(ints(want)));
}

TEST_CASE_METHOD(MpFixture, "alltoall: outputs[s] receives rank s's inputs[r], tensors of different sizes", "[alltoall]") {
  auto pg = shared_group();
  const int ws = size(), r = rank();
  TensorList ins, outs;
  for (int s = 0; s < ws; ++s) {
    // Rank r sends r+s+1 elements to rank s; rank r receives s+r+1 from rank s.
    ins.push_back(dev(full({r + s + 1}, double(r * 10 + s), DType::Float64)));
    outs.push_back(dev(zeros({s + r + 1}, DType::Float64)));
  }
  finish(pg->alltoall(outs, ins));
  for (int s = 0; s < ws; ++s) CHECK_THAT(outs[static_cast<size_t>(s)], Equals(full({s + r + 1}, double(s * 10 + r), DType::Float64)));
}

TEST_CASE_METHOD(MpFixture, "alltoall_single: a block for itself larger than expected fails before sending",
                 "[alltoall]") {
  // The engines' own rules, so without the shared-memory staging (staged_exchange_test.cc checks its
  // sizes). The failure breaks the group.
  GroupOptions go;
  go.shared_staging_max_bytes = 0;
  auto pg = make_group(go);
  const int ws = size();
  // Every rank sends one element to each rank and two to itself, but expects one from itself: MPI's
  // truncation rule; gloo and NCCL need the two equal.
  std::vector<int64_t> in_splits(static_cast<size_t>(ws), 1), out_splits(static_cast<size_t>(ws), 1);
  in_splits[static_cast<size_t>(rank())] = 2;
  Tensor in = zeros({ws + 1}, DType::Int64);
  Tensor out = zeros({ws}, DType::Int64);
  auto work = pg->alltoall_single(out, in, out_splits, in_splits);
  CHECK_THROWS_WITH(work->wait(), Contains("alltoall_single") && Contains("sends itself 2 elements but expects 1"));
  if (backend() == "mpi") CHECK_THROWS_WITH(work->wait(), Contains("message truncated"));
}

TEST_CASE_METHOD(MpFixture, "alltoall_single: a piece of another length than its receiver expects fails there",
                 "[alltoall][mpi]") {
  // MPI completes a receive with a shorter message than posted; the mpi engine's exchange checks the
  // length itself. gloo's engine takes the short piece without a word (so between hosts it goes
  // unnoticed there; on one host gloo stages every size, and the staging checks every rank's sizes).
  if (backend() != "mpi" || size() < 2) return;
  GroupOptions go;
  go.shared_staging_max_bytes = 0;
  auto pg = make_group(go);
  const int ws = size();
  // Every rank sends 2 elements to each rank; rank 0 expects 3 from rank 1.
  const std::vector<int64_t> in_splits(static_cast<size_t>(ws), 2);
  std::vector<int64_t> out_splits(static_cast<size_t>(ws), 2);
  if (rank() == 0) out_splits[1] = 3;
  Tensor in = full({2 * ws}, double(rank()), DType::Float64);
  Tensor out = zeros({2 * ws + (rank() == 0 ? 1 : 0)}, DType::Float64);
  auto work = pg->alltoall_single(out, in, out_splits, in_splits);
  if (rank() == 0) {
    CHECK_THROWS_WITH(work->wait(), Contains("alltoall_single") &&
                                        Contains("invalid tensor size: rank 1 sent 2 elements, this rank expects 3"));
  } else {
    CHECK_NOTHROW(work->wait());
    CHECK_THAT(out.narrow(0, 2, 2), Equals(full({2}, 1.0, DType::Float64)));
  }
  sync("short-piece-seen");
  // A longer piece: MPI's truncation error, from the request's own status.
  auto pg2 = make_group(go);
  if (rank() == 0) out_splits[1] = 1;
  Tensor out2 = zeros({2 * ws - (rank() == 0 ? 1 : 0)}, DType::Float64);
  auto work2 = pg2->alltoall_single(out2, in, out_splits, in_splits);
  if (rank() == 0) {
    CHECK_THROWS_WITH(work2->wait(), Contains("alltoall_single") && Contains("truncated"));
  } else {
    CHECK_NOTHROW(work2->wait());
  }
}
