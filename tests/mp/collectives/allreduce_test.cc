// allreduce: torch's simple_reduce_tests and simple_multi_input_reduce_tests (test_c10d_gloo.py) as formulas of
// rank and world size, the convenience form, and empty, non-contiguous and large inputs.
#include "tests/mp/support/mp_test.h"
#include "tests/mp/support/reduce_reference.h"

using namespace braid;
using namespace braid::mp;
using Catch::Contains;

TEST_CASE_METHOD(MpFixture, "allreduce: one tensor, every op of simple_reduce_tests", "[allreduce]") {
  auto pg = shared_group();
  for (const SimpleReduceCase& c : simple_reduce_cases(rank(), size())) {
    INFO(fmt::format("{} of {}", c.op, to_string(c.input)));
    TensorList xs{dev(c.input)};
    AllreduceOptions o;
    o.reduce_op = c.op;
    if (reduce_refused(c.op, c.input.dtype(), backend())) {
      CHECK_THROWS_WITH(pg->allreduce(xs, o), Contains("unsupported reduction operation"));
      continue;
    }
    const TensorList out = finish(pg->allreduce(xs, o));
    CHECK_THAT(xs[0], Equals(c.expected));
    REQUIRE(out.size() == 1);
    CHECK(out[0].is_same(xs[0]));
  }
}

TEST_CASE_METHOD(MpFixture, "allreduce: two tensors per rank reduce over all tensors of all ranks", "[allreduce]") {
  auto pg = shared_group();
  const int r = rank(), ws = size();
  const struct {
    ReduceOp op;
    double a, b, expected;
  } cases[] = {
      {ReduceOp::SUM, 2.0 * r, 2.0 * r + 1, ws * (2.0 * ws - 1)},
      {ReduceOp::PRODUCT, 2.0 * r + 1, 2.0 * r + 2, static_cast<double>(factorial(2 * ws))},
      {ReduceOp::MIN, 2.0 * r + 1, 2.0 * r + 2, 1.0},
      {ReduceOp::MAX, 2.0 * r + 1, 2.0 * r + 2, 2.0 * ws},
  };
  for (const auto& c : cases) {
    INFO(fmt::format("{}", c.op));
    TensorList xs{dev(floats({c.a})), dev(floats({c.b}))};
    AllreduceOptions o;
    o.reduce_op = c.op;
    const TensorList out = finish(pg->allreduce(xs, o));
    CHECK_THAT(xs[0], Equals(floats({c.expected})));
    CHECK_THAT(xs[1], Equals(floats({c.expected})));
    CHECK(out.size() == 2);
  }
}

TEST_CASE_METHOD(MpFixture, "allreduce: default options sum", "[allreduce]") {
  auto pg = shared_group();
  TensorList xs{dev(floats({rank() + 1.0}))};
  finish(pg->allreduce(xs));
  CHECK_THAT(xs[0], Equals(floats({size() * (size() + 1) / 2.0})));
}

TEST_CASE_METHOD(MpFixture, "allreduce: empty, non-contiguous and large tensors", "[allreduce][layout]") {
  auto pg = shared_group();
  const int ws = size();
  {
    TensorList xs{dev(empty({0}))};
    const TensorList out = finish(pg->allreduce(xs));
    CHECK(out.at(0).numel() == 0);
  }
  {
    // A stride-2 column; the other column must not change.
    Tensor col = column_view(dev(floats({rank() + 1.0, 2.0 * rank(), -1.0})));
    TensorList xs{col};
    finish(pg->allreduce(xs));
    CHECK_THAT(col.contiguous(), Equals(floats({ws * (ws + 1) / 2.0, ws * (ws - 1.0), -1.0 * ws})));
    Tensor base = col.as_strided({3, 2}, {2, 1}, 0);
    CHECK_THAT(base.select(1, 1).contiguous(), Equals(floats({-7, -7, -7})));
  }
  {
    // A transposed int64 matrix with a list of two such views.
    Tensor a = dev(arange(0, 6, 1, DType::Int64).view({2, 3})).t();
    Tensor b = dev(full({2, 3}, int64_t{rank()}, DType::Int64)).t();
    TensorList xs{a, b};
    finish(pg->allreduce(xs));
    const Tensor want = braid::add(arange(0, 6, 1, DType::Int64).view({2, 3}).t(), Scalar(int64_t{ws * (ws - 1) / 2}))
                            .add(arange(0, 6, 1, DType::Int64).view({2, 3}).t(), Scalar(ws - 1))
                            .contiguous();
    CHECK_THAT(a.contiguous(), Equals(want));
    CHECK_THAT(b.contiguous(), Equals(want));
  }
  {
    // 4 MiB of float32: the engines' chunked/pipelined paths.
    const int64_t n = 1 << 20;
    Tensor x = dev(full({n}, 1.0 + rank()));
    TensorList xs{x};
    finish(pg->allreduce(xs));
    CHECK_THAT(x, Equals(full({n}, ws * (ws + 1) / 2.0)));
  }
}

TEST_CASE_METHOD(MpFixture, "allreduce: a group over two loopback devices uses both", "[allreduce][devices]") {
  // torch's test_multi_device_constructor: gloo's `devices` option (other engines ignore it).
  GroupOptions go;
  go.devices = {"lo", "lo"};
  go.timeout = Millis(5000);
  auto pg = make_group(go);
  std::vector<Future<TensorList>> futs;
  std::vector<Tensor> ts;
  for (int i = 0; i < 4; ++i) {
    TensorList xs{dev(ones({i + 1}))};
    ts.push_back(xs[0]);
    futs.push_back(pg->allreduce(xs)->get_future());
  }
  wait_all(futs, kTestGroupTimeout);
  for (int i = 0; i < 4; ++i) CHECK_THAT(ts[static_cast<size_t>(i)], Equals(full({i + 1}, double(size()))));
}
