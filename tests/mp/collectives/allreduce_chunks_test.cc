// allreduce split into chunks (the mpi engine's BackendOptions::mpi_allreduce_chunk_bytes): with a chunk
// of a few bytes every reduction of the reference model (every ReduceOp x dtype) runs as several engine
// calls, with a last chunk shorter than the others, and must give the same results as one call. Other
// engines ignore the option, so the same cases run (and must pass) on every engine.
#include <algorithm>

#include "tests/mp/support/mp_test.h"
#include "tests/mp/support/reduce_reference.h"

using namespace braid;
using namespace braid::mp;
using Catch::Contains;

namespace {

// Rank r's value at index i, and the expected reduction over ws ranks, for the large-buffer case: small
// integers, so float sums and products are exact.
double chunk_value(int64_t i, int r) { return static_cast<double>((i * 7 + r * 3) % 5) + 1.0; }

double chunk_expected(ReduceOp op, int64_t i, int ws) {
  double acc = chunk_value(i, 0);
  for (int r = 1; r < ws; ++r) {
    const double v = chunk_value(i, r);
    switch (op.kind) {
      case ReduceOp::SUM:
      case ReduceOp::AVG: acc += v; break;
      case ReduceOp::PRODUCT: acc *= v; break;
      case ReduceOp::MIN: acc = std::min(acc, v); break;
      case ReduceOp::MAX: acc = std::max(acc, v); break;
      default: FAIL(fmt::format("no model for {}", op));
    }
  }
  return op.kind == ReduceOp::AVG ? acc / ws : acc;
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "allreduce in chunks: reduce ops x dtypes with chunks of a few bytes",
                 "[allreduce][dtype][chunks]") {
  // 2 bytes: one element per chunk for 2-byte and wider dtypes, two for 1-byte dtypes (inputs of 5
  // elements end on a short chunk); 12 bytes: several elements per chunk, uneven for most dtypes.
  for (int64_t chunk_bytes : {int64_t{2}, int64_t{12}}) {
    GroupOptions g;
    g.mpi_allreduce_chunk_bytes = chunk_bytes;
    auto pg = make_group(g);
    for (DType dt : kRealDTypes) {
      for (ReduceOp op : all_reduce_ops()) {
        INFO(case_name(op, dt) << ", chunks of " << chunk_bytes << " bytes");
        if (reduce_refused(op, dt, backend())) continue;
        TensorList xs{dev(reduce_input(op, dt, rank()))};
        AllreduceOptions o;
        o.reduce_op = op;
        finish(pg->allreduce(xs, o));
        CHECK_THAT(xs[0], Equals(reduce_expected(op, dt, size())));
      }
    }
  }
}

TEST_CASE_METHOD(MpFixture, "allreduce in chunks: a large buffer, a non-contiguous view and a coalesced list",
                 "[allreduce][chunks]") {
  GroupOptions g;
  g.mpi_allreduce_chunk_bytes = 4096;  // 1024 float32 per chunk: 10 full chunks and a short one
  auto pg = make_group(g);
  const int64_t n = 10 * 1024 + 7;
  std::vector<double> mine(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) mine[static_cast<size_t>(i)] = chunk_value(i, rank());
  for (ReduceOp op : {ReduceOp(ReduceOp::SUM), ReduceOp(ReduceOp::AVG), ReduceOp(ReduceOp::PRODUCT),
                      ReduceOp(ReduceOp::MIN), ReduceOp(ReduceOp::MAX)}) {
    INFO(fmt::format("{}", op));
    std::vector<double> want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) want[static_cast<size_t>(i)] = chunk_expected(op, i, size());
    const Tensor expected = floats(want);
    // AVG divides by the world size: exact only for powers of two, so it is compared to within rounding.
    const double rtol = op == ReduceOp::AVG ? 1e-6 : 0;
    AllreduceOptions o;
    o.reduce_op = op;

    TensorList xs{dev(floats(mine))};
    finish(pg->allreduce(xs, o));
    CHECK_THAT(xs[0], Equals(expected, rtol));

    Tensor col = column_view(floats(mine, DType::Float64));  // strided: staged through a packed buffer
    TensorList cols{dev(col)};
    finish(pg->allreduce(cols, o));
    CHECK_THAT(cols[0].contiguous(), Equals(floats(want, DType::Float64), rtol));

    const Tensor all = floats(mine);
    TensorList parts{dev(all.narrow(0, 0, 3000).clone()), dev(all.narrow(0, 3000, n - 3000).clone())};
    AllreduceCoalescedOptions co;
    co.reduce_op = op;
    finish(pg->allreduce_coalesced(parts, co));
    CHECK_THAT(parts[0], Equals(expected.narrow(0, 0, 3000).contiguous(), rtol));
    CHECK_THAT(parts[1], Equals(expected.narrow(0, 3000, n - 3000).contiguous(), rtol));
  }
}

TEST_CASE_METHOD(MpFixture, "allreduce in chunks: chunking off, and a negative chunk size refused",
                 "[allreduce][chunks]") {
  GroupOptions off;
  off.mpi_allreduce_chunk_bytes = 0;
  auto pg = make_group(off);
  TensorList xs{dev(full({4096}, rank() + 1.0))};
  finish(pg->allreduce(xs, {}));
  CHECK_THAT(xs[0], Equals(full({4096}, size() * (size() + 1) / 2.0)));
  if (backend() == "mpi") {
    GroupOptions bad;
    bad.mpi_allreduce_chunk_bytes = -1;
    // Refused before any communicator is created, on every rank alike.
    CHECK_THROWS_WITH(make_group(bad), Contains("mpi_allreduce_chunk_bytes must be a size >= 0"));
  }
}
