// reduce: every op of torch's simple_reduce_tests table × every root (test_c10d_gloo.py test_reduce_basics): the root
// gets the allreduce result; non-root buffers are unspecified, except that the caller's tensor must not be
// corrupted into something unrelated (braid leaves it unchanged, as PyTorch 1.13 does).
#include "tests/mp/support/mp_test.h"
#include "tests/mp/support/reduce_reference.h"

using namespace braid;
using namespace braid::mp;
using Catch::Contains;

TEST_CASE_METHOD(MpFixture, "reduce: every op of simple_reduce_tests, every root", "[reduce]") {
  auto pg = shared_group();
  const int r = rank(), ws = size();
  const auto cases = simple_reduce_cases(r, ws);
  for (const SimpleReduceCase& c : cases) {
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
