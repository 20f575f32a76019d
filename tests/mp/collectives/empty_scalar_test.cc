// Empty tensors (numel 0) through every collective and point-to-point (torch's test_empty_tensors says
// broadcast must take them; braid takes them everywhere), and 0-dim (scalar) tensors, which have one element
// and no shape.
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;

TEST_CASE_METHOD(MpFixture, "empty tensors: every collective completes and leaves them empty", "[empty]") {
  auto pg = shared_group();
  const int ws = size();
  auto e = [&] { return dev(empty({0})); };
  auto list = [&](int n) {
    TensorList l;
    for (int i = 0; i < n; ++i) l.push_back(e());
    return l;
  };
  TensorList one = list(1);
  CHECK(finish(pg->broadcast(one)).size() == 1);
  CHECK(finish(pg->allreduce(one)).size() == 1);
  TensorList two = list(2);
  CHECK(finish(pg->allreduce_coalesced(two)).size() == 2);
  CHECK(finish(pg->reduce(one)).size() == 1);
  std::vector<TensorList> ag{list(ws)};
  CHECK(finish(pg->allgather(ag, one)).size() == static_cast<size_t>(ws));
  Tensor out0 = e(), in0 = e();
  CHECK(finish(pg->allgather_into_tensor(out0, in0)).size() == 1);
  std::vector<TensorList> agc;
  for (int r = 0; r < ws; ++r) agc.push_back(list(2));
  CHECK(finish(pg->allgather_coalesced(agc, two)).size() == static_cast<size_t>(2 * ws));
  std::vector<TensorList> g;
  if (rank() == 0) g.push_back(list(ws));
  finish(pg->gather(g, one));
  std::vector<TensorList> s;
  if (rank() == 0) s.push_back(list(ws));
  finish(pg->scatter(one, s));
  std::vector<TensorList> rs{list(ws)};
  finish(pg->reduce_scatter(one, rs));
  finish(pg->reduce_scatter_tensor(out0, in0));
  TensorList a_out = list(ws), a_in = list(ws);
  finish(pg->alltoall(a_out, a_in));
  Tensor rows_out = dev(empty({0, 3})), rows_in = dev(empty({0, 3}));
  finish(pg->alltoall_single(rows_out, rows_in, {}, {}));
  if (ws > 1) {
    TensorList msg = list(1), buf = list(1);
    auto sw = pg->send(msg, (rank() + 1) % ws, 5);
    pg->recv(buf, (rank() + ws - 1) % ws, 5)->wait();
    sw->wait();
  }
  for (const Tensor& t : one) CHECK(t.numel() == 0);
  // The group is in step afterwards.
  TensorList xs{dev(ints({1}))};
  finish(pg->allreduce(xs));
  CHECK_THAT(xs[0], Equals(ints({ws})));
}

TEST_CASE_METHOD(MpFixture, "0-dim tensors: broadcast, allreduce and allgather of scalars", "[empty][scalar]") {
  auto pg = shared_group();
  const int ws = size();
  Tensor s = dev(scalar_tensor(Scalar(double(rank() + 1)), DType::Float64));
  TensorList xs{s};
  finish(pg->allreduce(xs));
  CHECK_THAT(s, Equals(scalar_tensor(Scalar(ws * (ws + 1) / 2.0), DType::Float64)));
  Tensor b = dev(scalar_tensor(Scalar(int64_t{rank() + 10}), DType::Int64));
  TensorList bs{b};
  BroadcastOptions o;
  o.root_rank = ws - 1;
  finish(pg->broadcast(bs, o));
  CHECK_THAT(b, Equals(scalar_tensor(Scalar(int64_t{ws + 9}), DType::Int64)));
  TensorList in{dev(scalar_tensor(Scalar(int64_t{rank()}), DType::Int64))};
  std::vector<TensorList> outs(1);
  for (int r = 0; r < ws; ++r) outs[0].push_back(dev(scalar_tensor(Scalar(int64_t{-1}), DType::Int64)));
  finish(pg->allgather(outs, in));
  for (int r = 0; r < ws; ++r) CHECK_THAT(outs[0][static_cast<size_t>(r)], Equals(scalar_tensor(Scalar(int64_t{r}), DType::Int64)));
}
