// reduce: every op of the seed's single-tensor table × every root (SPEC B.5 test_reduce_basics): the root
// gets the allreduce result; non-root buffers are unspecified, except that the caller's tensor must not be
// corrupted into something unrelated (braid leaves it unchanged, as PyTorch 1.13 does).
#include "tests/mp/support/mp_test.h"
#include "tests/mp/support/reduce_reference.h"

using namespace braid;
using namespace braid::mp;
using Catch::Contains;

TEST_CASE_METHOD(MpFixture, "reduce: every op of the seed's table, every root", "[reduce]") {
  auto pg = shared_group();
  const int r = rank(), ws = size();
  struct Case {
    ReduceOp op;
    Tensor input, expected;
  };
  std::vector<Case> cases = {
      {ReduceOp::SUM, floats({r + 1.0}), floats({ws * (ws + 1) / 2.0})},
      {ReduceOp::PRODUCT, floats({r + 1.0}), floats({static_cast<double>(factorial(ws))})},
      {ReduceOp::MIN, floats({r + 1.0}), floats({1.0})},
      {ReduceOp::MAX, floats({r + 1.0}), floats({static_cast<double>(ws)})},
  };
  for (int i = 0; i < 4; ++i) {
    cases.push_back({ReduceOp::BAND, ints({r | (1 << i)}, DType::Int32), ints({1 << i}, DType::Int32)});
  }
  for (int i = 1; i < 5; ++i) {
    int64_t v_or = 0, v_xor = 0;
    for (int j = 0; j < i; ++j) {
      v_or |= r * i + j;
      v_xor ^= r * i + j;
    }
    cases.push_back({ReduceOp::BOR, ints({v_or}, DType::Int32), ints({or_range(ws * i)}, DType::Int32)});
    cases.push_back({ReduceOp::BXOR, ints({v_xor}, DType::Int32), ints({xor_range(ws * i)}, DType::Int32)});
  }
  for (const Case& c : cases) {
    for (int root = 0; root < ws; ++root) {
      INFO(fmt::format("{} of {} to root {}", c.op, to_string(c.input), root));
      TensorList xs{dev(c.input.clone())};
      ReduceOptions o;
      o.reduce_op = c.op;
      o.root_rank = root;
      if (reduce_refused(c.op, c.input.dtype(), backend())) {
        CHECK_THROWS_WITH(pg->reduce(xs, o), Contains("unsupported reduction operation"));
        continue;
      }
      const TensorList out = finish(pg->reduce(xs, o));
      REQUIRE(out.size() == 1);
      if (r == root) {
        CHECK_THAT(xs[0], Equals(c.expected));
      } else {
        CHECK_THAT(xs[0], Equals(c.input));
      }
    }
  }
}

TEST_CASE_METHOD(MpFixture, "reduce: a non-contiguous tensor and a large one", "[reduce][layout]") {
  auto pg = shared_group();
  const int ws = size(), root = ws - 1;
  ReduceOptions o;
  o.root_rank = root;
  Tensor col = column_view(dev(floats({rank() + 1.0, 3.0})));
  TensorList xs{col};
  finish(pg->reduce(xs, o));
  if (rank() == root) CHECK_THAT(col.contiguous(), Equals(floats({ws * (ws + 1) / 2.0, 3.0 * ws})));

  const int64_t n = 1 << 20;
  Tensor big = dev(full({n}, int64_t{rank()}, DType::Int64));
  TensorList bs{big};
  o.root_rank = 0;
  finish(pg->reduce(bs, o));
  if (rank() == 0) CHECK_THAT(big, Equals(full({n}, int64_t{ws * (ws - 1) / 2}, DType::Int64)));
}
