// allreduce_coalesced: torch's simple_coalesced_reduce_tests, the asynchronous form through
// futures (test_allreduce_coalesced_async), and a list of mixed shapes including an empty tensor.
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;

TEST_CASE_METHOD(MpFixture, "allreduce_coalesced: each list position reduces separately", "[allreduce_coalesced]") {
  auto pg = shared_group();
  const double r = rank(), ws = size();
  const struct {
    ReduceOp op;
    std::vector<double> in, out;
  } cases[] = {
      {ReduceOp::SUM, {r + 1, (r + 1) * (r + 1)}, {ws * (ws + 1) / 2, ws * (ws + 1) * (2 * ws + 1) / 6}},
      {ReduceOp::PRODUCT, {r + 1, r + 2},
       {static_cast<double>(factorial(size())), static_cast<double>(factorial(size() + 1))}},
      {ReduceOp::MIN, {r, r + 1}, {0, 1}},
      {ReduceOp::MAX, {r + 1, r + 2}, {ws, ws + 1}},
  };
  for (const auto& c : cases) {
    INFO(fmt::format("{}", c.op));
    TensorList xs{dev(floats({c.in[0]})), dev(floats({c.in[1]}))};
    AllreduceCoalescedOptions o;
    o.reduce_op = c.op;
    const TensorList out = finish(pg->allreduce_coalesced(xs, o));
    CHECK_THAT(xs[0], Equals(floats({c.out[0]})));
    CHECK_THAT(xs[1], Equals(floats({c.out[1]})));
    REQUIRE(out.size() == 2);  // the future holds the list passed in
    CHECK(out[0].is_same(xs[0]));
    CHECK(out[1].is_same(xs[1]));
  }
}

TEST_CASE_METHOD(MpFixture, "allreduce_coalesced: futures of two lists, waited together", "[allreduce_coalesced][future]") {
  auto pg = shared_group();
  const int ws = size();
  std::vector<TensorList> lists;
  for (int i = 0; i < 2; ++i) {
    lists.push_back({dev(ints({i + rank()})), dev(ints({i + rank()}))});
  }
  std::vector<Future<TensorList>> futs;
  for (auto& l : lists) futs.push_back(pg->allreduce_coalesced(l)->get_future());
  const auto values = wait_all(futs, kTestGroupTimeout);
  for (int i = 0; i < 2; ++i) {
    INFO("list " << i);
    const Tensor want = ints({i * ws + ws * (ws - 1) / 2});
    REQUIRE(values[static_cast<size_t>(i)].size() == 2);
    CHECK_THAT(values[static_cast<size_t>(i)][0], Equals(want));
    CHECK_THAT(values[static_cast<size_t>(i)][1], Equals(want));
  }
}

TEST_CASE_METHOD(MpFixture, "allreduce_coalesced: mixed shapes, an empty and a non-contiguous tensor", "[allreduce_coalesced][layout]") {
  auto pg = shared_group();
  const int ws = size();
  Tensor a = dev(full({2, 3}, double(rank()), DType::Float64));
  Tensor e = dev(empty({0}, DType::Float64));
  Tensor c = column_view(dev(floats({1.0 * rank(), 2.0}, DType::Float64)));
  Tensor d = dev(full({5}, 1.0, DType::Float64));
  TensorList xs{a, e, c, d};
  finish(pg->allreduce_coalesced(xs));
  CHECK_THAT(a, Equals(full({2, 3}, ws * (ws - 1) / 2.0, DType::Float64)));
  CHECK(e.numel() == 0);
  CHECK_THAT(c.contiguous(), Equals(floats({ws * (ws - 1) / 2.0, 2.0 * ws}, DType::Float64)));
  CHECK_THAT(d, Equals(full({5}, double(ws), DType::Float64)));
}
