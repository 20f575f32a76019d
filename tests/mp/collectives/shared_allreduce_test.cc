// Allreduce through the group's shared-memory pool (ProcessGroup::empty_shared, collectives/
// shared_allreduce.h): results equal the engine's for every size around the per-rank shares, the path is
// really taken (the shared-memory engine's counters), and every rank falls back to the engine together
// when any rank's buffer is not in its pool, is of a dtype or op the shared path does not reduce, or is
// below the minimum size. The timeout case is in timeout_test.cc.
#include "tests/mp/support/mp_test.h"
#include "tests/mp/support/staging_groups.h"

using namespace braid;
using namespace braid::mp;

namespace {

// Rank r's value at i: small integers, so float sums are exact in any order.
double shared_value(int64_t i, int r) { return static_cast<double>((i * 5 + r * 3) % 7) - 2.0; }

double shared_sum(int64_t i, int ws) {
  double s = 0;
  for (int r = 0; r < ws; ++r) s += shared_value(i, r);
  return s;
}

void fill(Tensor& t, int rank) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype() == DType::Float64) t.data<double>()[i] = shared_value(i, rank);
    else if (t.dtype() == DType::Float32) t.data<float>()[i] = static_cast<float>(shared_value(i, rank));
    else t.data<int32_t>()[i] = static_cast<int32_t>(shared_value(i, rank));
  }
}

bool equals_sum(const Tensor& t, int ws, double scale = 1.0) {
  const Tensor d = t.to(DType::Float64);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (d.data<double>()[i] != shared_sum(i, ws) * scale) return false;
  }
  return true;
}

// Options of a group whose allreduces of pool buffers take the shared path however small they are.
GroupOptions shared_at_any_size() {
  GroupOptions go;
  go.shared_memory_min_bytes = 0;
  return go;
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "shared-memory allreduce: SUM and AVG over the pool equal the engine's",
                 "[allreduce][shared]") {
  if (!supports_cpu() || size() < 2) return;
  auto pg = make_group(shared_at_any_size());
  const auto q = shm_counts(pg);
  // 1 and 15 elements: one rank owns everything; 16 * size + 3: a short last share; 100003: many blocks.
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{16} * size() + 3, int64_t{100003}}) {
      for (auto kind : {collectives::ReduceOp::SUM, collectives::ReduceOp::AVG}) {
        INFO(dtype_name(dt) << " x " << n << (kind == collectives::ReduceOp::SUM ? " SUM" : " AVG"));
        Tensor x = pg->empty_shared({n}, dt);
        fill(x, rank());
        const uint64_t before = q.shared_allreduces();
        TensorList xs{x};
        collectives::AllreduceOptions o;
        o.reduce_op = collectives::ReduceOp(kind);
        finish(pg->allreduce(xs, o));
        CHECK(q.shared_allreduces() == before + 1);
        // AVG of exact integer sums: one rounding of the division.
        if (kind == collectives::ReduceOp::SUM) {
          CHECK(equals_sum(xs[0], size()));
        } else {
          Tensor want = empty({n}, TensorOptions(dt));
          for (int64_t i = 0; i < n; ++i) {
            if (dt == DType::Float64) want.data<double>()[i] = shared_sum(i, size()) / size();
            else want.data<float>()[i] = static_cast<float>(shared_sum(i, size())) / static_cast<float>(size());
          }
          CHECK(allclose(xs[0], want, 1e-6, 0));
        }
      }
    }
  }
  // A view of a pool tensor (contiguous, at an offset) is in the pool too.
  Tensor big = pg->empty_shared({64}, DType::Float32);
  Tensor tail = big.slice(0, 32, 64);
  fill(tail, rank());
  const uint64_t before = q.shared_allreduces();
  TensorList ts{tail};
  finish(pg->allreduce(ts));
  CHECK(q.shared_allreduces() == before + 1);
  CHECK(equals_sum(ts[0], size()));
}

TEST_CASE_METHOD(MpFixture, "shared-memory allreduce: every rank falls back to the engine together",
                 "[allreduce][shared]") {
  if (!supports_cpu() || size() < 2) return;
  auto pg = make_group(shared_at_any_size());
  const auto q = shm_counts(pg);
  const int64_t n = 4099;

  SECTION("one rank's buffer is ordinary memory") {
    // The first empty_shared is collective (it sets up the pool): every rank makes it; rank 0 then
    // reduces a buffer of ordinary memory.
    Tensor pooled = pg->empty_shared({n}, DType::Float32);
    Tensor x = rank() == 0 ? empty({n}, TensorOptions(DType::Float32)) : pooled;
    fill(x, rank());
    TensorList xs{x};
    finish(pg->allreduce(xs));
    CHECK(equals_sum(xs[0], size()));
    CHECK(q.shared_allreduces() == 0);
  }
  SECTION("a dtype or op the shared path does not reduce") {
    Tensor i32 = pg->empty_shared({n}, DType::Int32);
    fill(i32, rank());
    TensorList is{i32};
    finish(pg->allreduce(is));
    CHECK(equals_sum(is[0], size()));
    Tensor f = pg->empty_shared({n}, DType::Float32);
    fill(f, rank());
    TensorList fs{f};
    collectives::AllreduceOptions o;
    o.reduce_op = collectives::ReduceOp(collectives::ReduceOp::MAX);
    finish(pg->allreduce(fs, o));
    CHECK(q.shared_allreduces() == 0);
  }
  SECTION("below the minimum size") {
    GroupOptions small;
    small.shared_memory_min_bytes = 4 * n + 4;
    auto pg2 = make_group(small);
    Tensor x = pg2->empty_shared({n}, DType::Float32);
    fill(x, rank());
    TensorList xs{x};
    finish(pg2->allreduce(xs));
    CHECK(equals_sum(xs[0], size()));
    CHECK(shm_counts(pg2).shared_allreduces() == 0);
  }
}
