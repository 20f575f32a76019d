// Two-level collectives (collectives/hier/): allreduce, reduce_scatter, allgather and broadcast on groups
// whose ranks span hosts with several on some host. On one machine the hosts are emulated
// (BRAID_EMULATED_HOST, collectives/core/host_layout.h): CTest runs the whole suite as 2 hosts x 2 ranks
// (collectives_mp/<backend>/np4-2hosts) and these cases also as 2 + 1 (collectives_mp/<backend>/np3-2hosts).
// Without emulation every rank is on one host and each case checks that the two-level engine stays out.
//
// Each case derives the layout the group must see from every rank's host_identity(), checks the results
// against values computed from the inputs, and checks through the engine's counters which path ran:
// by slices (every host the same number of ranks), by leaders (the rest), or the flat engines (one host,
// two levels off, below the minimum size, or reduce_scatter/allgather on hosts of different sizes).
#include <cmath>
#include <cstring>

#include "collectives/core/host_layout.h"
#include "collectives/queue/engine_process_group.h"
#include "tensor/ops/shape_ops.h"
#include "tests/mp/support/mp_test.h"
#include "tests/mp/support/reduce_reference.h"

using namespace braid;
using namespace braid::mp;

namespace {

// The layout every group of this job has (every rank's host_identity(), through the store).
collectives::HostLayout job_layout(MpFixture& f) {
  f.store()->set(fmt::format("host/{}", f.rank()), store::to_bytes(collectives::host_identity()));
  std::vector<std::string> keys;
  for (int r = 0; r < f.size(); ++r) keys.push_back(fmt::format("host/{}", r));
  std::vector<std::string> ids;
  for (const auto& v : f.store()->multi_get(keys)) ids.push_back(store::to_string(v));
  return collectives::HostLayout::from_identities(ids);
}

uint64_t hier_count(const std::shared_ptr<ProcessGroup>& pg, const char* path) {
  const auto* g = dynamic_cast<const collectives::EngineProcessGroup*>(pg.get());
  REQUIRE(g != nullptr);
  return g->engine_count("hier", path);
}

// `t` repeated `times` times, cut to `n` elements.
Tensor tiled(const Tensor& t, int times, int64_t n) {
  std::vector<Tensor> parts(static_cast<size_t>(times), t);
  return cat(parts).narrow(0, 0, n).contiguous();
}

// Element i of rank r's input: small integers, so every float sum is exact whatever the order.
Tensor counting(int64_t n, int r, DType dt = DType::Float32) {
  Tensor t = empty({n}, TensorOptions(DType::Float64));
  auto* p = t.data<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<double>(i % 97 + 3 * r);
  return t.to(dt);
}

// The sum of counting(n, r) over r < ws.
Tensor counting_sum(int64_t n, int ws) {
  Tensor t = empty({n}, TensorOptions(DType::Float64));
  auto* p = t.data<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<double>(ws * (i % 97) + 3 * ws * (ws - 1) / 2);
  return t.to(DType::Float32);
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "two levels: allreduce of every dtype and op, counts around the local size",
                 "[hier][allreduce][dtype]") {
  if (!supports_cpu() || size() < 2) return;
  const auto layout = job_layout(*this);
  auto pg = make_group();
  const int local = layout.max_local_size();
  for (DType dt : kRealDTypes) {
    for (ReduceOp op : all_reduce_ops()) {
      if (reduce_refused(op, dt, backend())) continue;
      const Tensor x = reduce_input(op, dt, rank());
      const Tensor want = reduce_expected(op, dt, size());
      const int64_t k = x.numel();
      // One slice per local rank and a tail, fewer elements than local ranks, and an exact multiple.
      for (int64_t n : {int64_t{1}, 3 * k - 1, 2 * k * local}) {
        const int times = static_cast<int>((n + k - 1) / k);
        INFO(case_name(op, dt) << " x " << n << " on " << layout.describe());
        const uint64_t slices = hier_count(pg, "allreduce_slices");
        const uint64_t leaders = hier_count(pg, "allreduce_leaders");
        TensorList xs{tiled(x, times, n)};
        AllreduceOptions o;
        o.reduce_op = op;
        finish(pg->allreduce(xs, o));
        CHECK_THAT(xs[0], Equals(tiled(want, times, n)));
        const bool by_slices = layout.two_levels() && layout.uniform() && n >= local;
        const bool by_leaders = layout.two_levels() && !by_slices;
        CHECK(hier_count(pg, "allreduce_slices") == slices + (by_slices ? 1 : 0));
        CHECK(hier_count(pg, "allreduce_leaders") == leaders + (by_leaders ? 1 : 0));
      }
    }
  }
}

TEST_CASE_METHOD(MpFixture, "two levels: every rank holds the same bits, run after run", "[hier][allreduce]") {
  if (!supports_cpu() || size() < 2) return;
  auto pg = make_group();
  // Sums whose rounding depends on the order: a rank that added in another order would differ.
  const int64_t n = 100003;
  Tensor x = empty({n}, TensorOptions(DType::Float32));
  auto* p = x.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float mantissa = 1.0f + 0.1f * static_cast<float>((i * 7 + rank() * 13) % 11);
    p[i] = std::ldexp(mantissa, static_cast<int>((i + rank()) % 23) - 11);
  }
  TensorList first{x.clone()};
  TensorList second{x.clone()};
  finish(pg->allreduce(first));
  finish(pg->allreduce(second));
  CHECK(std::memcmp(first[0].data_ptr(), second[0].data_ptr(), first[0].nbytes()) == 0);
  Tensor all = empty({size() * n}, TensorOptions(DType::Float32));
  finish(pg->allgather_into_tensor(all, first[0]));
  for (int r = 0; r < size(); ++r) {
    INFO("rank " << r << "'s sum against rank 0's");
    CHECK(std::memcmp(all.narrow(0, r * n, n).data_ptr(), all.narrow(0, 0, n).data_ptr(), first[0].nbytes()) == 0);
  }
}

TEST_CASE_METHOD(MpFixture, "two levels: reduce_scatter and allgather keep the group's rank order",
                 "[hier][reduce_scatter][allgather]") {
  if (!supports_cpu() || size() < 2) return;
  const auto layout = job_layout(*this);
  const bool served = layout.two_levels() && layout.uniform();
  auto pg = make_group();
  for (int64_t block : {int64_t{1}, int64_t{5}, int64_t{4099}}) {
    INFO(block << " elements per rank on " << layout.describe());
    const uint64_t scatters = hier_count(pg, "reduce_scatter");
    Tensor out = empty({block}, TensorOptions(DType::Float32));
    Tensor in = counting(size() * block, rank());
    const uint64_t scattered_version = out.version();
    finish(pg->reduce_scatter_tensor(out, in));
    CHECK(out.version() == scattered_version);
    CHECK_THAT(out, Equals(counting_sum(size() * block, size()).narrow(0, rank() * block, block).contiguous()));
    CHECK(hier_count(pg, "reduce_scatter") == scatters + (served ? 1 : 0));

    const uint64_t gathers = hier_count(pg, "allgather");
    Tensor all = empty({size() * block}, TensorOptions(DType::Float64));
    Tensor mine = counting(block, rank(), DType::Float64);
    const uint64_t out_version = all.version();
    finish(pg->allgather_into_tensor(all, mine));
    // A collective writes its output as raw memory, as every engine does: FSDP gathers a parameter again
    // into storage that autograd saved for backward, which a version bump would refuse.
    CHECK(all.version() == out_version);
    for (int r = 0; r < size(); ++r) {
      CHECK_THAT(all.narrow(0, r * block, block).contiguous(), Equals(counting(block, r, DType::Float64)));
    }
    CHECK(hier_count(pg, "allgather") == gathers + (served ? 1 : 0));
    // In place: this rank's block is its input.
    Tensor inplace = zeros({size() * block}, TensorOptions(DType::Int64));
    inplace.narrow(0, rank() * block, block).copy_(counting(block, rank(), DType::Int64));
    Tensor own = inplace.narrow(0, rank() * block, block);
    finish(pg->allgather_into_tensor(inplace, own));
    for (int r = 0; r < size(); ++r) {
      CHECK_THAT(inplace.narrow(0, r * block, block).contiguous(), Equals(counting(block, r, DType::Int64)));
    }
  }
}

TEST_CASE_METHOD(MpFixture, "two levels: broadcast from every root", "[hier][broadcast]") {
  if (!supports_cpu() || size() < 2) return;
  const auto layout = job_layout(*this);
  auto pg = make_group();
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{300001}}) {
    for (int root = 0; root < size(); ++root) {
      INFO(n << " elements from root " << root << " on " << layout.describe());
      const uint64_t before = hier_count(pg, "broadcast");
      TensorList xs{rank() == root ? counting(n, root) : zeros({n}, DType::Float32)};
      BroadcastOptions o;
      o.root_rank = root;
      finish(pg->broadcast(xs, o));
      CHECK_THAT(xs[0], Equals(counting(n, root)));
      CHECK(hier_count(pg, "broadcast") == before + (layout.two_levels() ? 1 : 0));
    }
  }
}

TEST_CASE_METHOD(MpFixture, "two levels: off per group, and below the minimum size, the flat engines run",
                 "[hier][allreduce]") {
  if (!supports_cpu() || size() < 2) return;
  const auto layout = job_layout(*this);
  GroupOptions off;
  off.hierarchy = false;
  auto flat = make_group(off);
  GroupOptions large_only;
  large_only.hierarchy_min_bytes = 64 * 1024;
  auto large = make_group(large_only);
  for (int64_t n : {int64_t{15}, int64_t{16384}}) {
    INFO(n << " float32 on " << layout.describe());
    TensorList a{counting(n, rank())};
    TensorList b{counting(n, rank())};
    finish(flat->allreduce(a));
    finish(large->allreduce(b));
    CHECK_THAT(a[0], Equals(counting_sum(n, size())));
    CHECK_THAT(b[0], Equals(counting_sum(n, size())));
  }
  CHECK(hier_count(flat, "allreduce_slices") + hier_count(flat, "allreduce_leaders") == 0);
  // 15 floats are below 64 KiB, 16384 reach it.
  CHECK(hier_count(large, "allreduce_slices") + hier_count(large, "allreduce_leaders") ==
        (layout.two_levels() ? 1 : 0));
}
