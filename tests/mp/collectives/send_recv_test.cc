// Point-to-point: torch's test_c10d_gloo.py test_send_recv_all_to_all (every send and recv posted before any wait, so
// posting must never block), tags that keep messages apart, recv from any source with source_rank(), a
// pending recv that must not hold up collectives, staged (non-contiguous, bool) buffers and argument checks.
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using Catch::Contains;

TEST_CASE_METHOD(MpFixture, "send/recv: all to all, everything posted before any wait", "[p2p]") {
  auto pg = shared_group();
  const int ws = size();
  TensorList inputs, outputs;
  for (int i = 0; i < ws; ++i) {
    inputs.push_back(dev(ints({rank()})));
    outputs.push_back(dev(ints({-1})));
  }
  std::vector<std::shared_ptr<Work>> sends, recvs;
  for (int i = 0; i < ws; ++i) {
    if (i == rank()) continue;
    TensorList t{inputs[static_cast<size_t>(i)]};
    sends.push_back(pg->send(t, i, 0));
  }
  for (int i = 0; i < ws; ++i) {
    if (i == rank()) continue;
    TensorList t{outputs[static_cast<size_t>(i)]};
    recvs.push_back(pg->recv(t, i, 0));
  }
  for (auto& w : sends) {
    w->wait();
    CHECK(w->is_completed());
    CHECK(w->is_success());
  }
  for (auto& w : recvs) {
    w->wait();
    CHECK(w->is_completed());
  }
  for (int i = 0; i < ws; ++i) {
    INFO("from rank " << i);
    CHECK_THAT(outputs[static_cast<size_t>(i)], Equals(ints({i == rank() ? -1 : i})));
  }
}

TEST_CASE_METHOD(MpFixture, "send/recv: tags keep messages of one pair apart, whatever the order of the recvs", "[p2p]") {
  if (size() < 2) return;
  auto pg = shared_group();
  // Every rank sends two messages (tags 1 and 2) to its right neighbour and receives the tag 2 one first.
  const int right = (rank() + 1) % size(), left = (rank() + size() - 1) % size();
  TensorList m1{dev(ints({rank() * 10 + 1}))}, m2{dev(ints({rank() * 10 + 2}))};
  auto s1 = pg->send(m1, right, 1);
  auto s2 = pg->send(m2, right, 2);
  TensorList r2{dev(ints({-1}))}, r1{dev(ints({-1}))};
  auto w2 = pg->recv(r2, left, 2);
  auto w1 = pg->recv(r1, left, 1);
  w2->wait();
  w1->wait();
  s1->wait();
  s2->wait();
  CHECK_THAT(r1[0], Equals(ints({left * 10 + 1})));
  CHECK_THAT(r2[0], Equals(ints({left * 10 + 2})));
  CHECK(w1->source_rank() == left);
  CHECK(w2->source_rank() == left);
}

TEST_CASE_METHOD(MpFixture, "send/recv: recv_anysource reports the sender through source_rank()", "[p2p]") {
  if (size() < 2) return;
  auto pg = shared_group();
  if (rank() == 0) {
    std::vector<int> seen(static_cast<size_t>(size()), 0);
    for (int i = 1; i < size(); ++i) {
      TensorList buf{dev(ints({-1, -1}))};
      auto w = pg->recv_anysource(buf, 7);
      w->wait();
      const int src = w->source_rank();
      INFO("message " << i << " from " << src);
      REQUIRE(src >= 1);
      REQUIRE(src < size());
      CHECK_THAT(buf[0], Equals(ints({src, 100 + src})));
      seen[static_cast<size_t>(src)]++;
    }
    for (int r = 1; r < size(); ++r) CHECK(seen[static_cast<size_t>(r)] == 1);
  } else {
    TensorList msg{dev(ints({rank(), 100 + rank()}))};
    auto w = pg->send(msg, 0, 7);
    w->wait();
    CHECK(w->source_rank() == -1);  // only receives report a source
  }
}

TEST_CASE_METHOD(MpFixture, "send/recv: a pending recv does not hold up collectives on the group", "[p2p]") {
  if (size() < 2) return;
  auto pg = shared_group();
  // Rank 0 posts a recv whose send only comes after an allreduce that rank 0 must take part in.
  std::shared_ptr<Work> pending;
  TensorList buf{dev(ints({-1}))};
  if (rank() == 0) pending = pg->recv(buf, 1, 3);
  TensorList xs{dev(ints({1}))};
  finish(pg->allreduce(xs));
  CHECK_THAT(xs[0], Equals(ints({size()})));
  if (rank() == 1) {
    TensorList msg{dev(ints({42}))};
    pg->send(msg, 0, 3)->wait();
  }
  if (rank() == 0) {
    pending->wait();
    CHECK_THAT(buf[0], Equals(ints({42})));
  }
}

TEST_CASE_METHOD(MpFixture, "send/recv: staged buffers (non-contiguous, bool, bfloat16) and a 4 MiB message", "[p2p][layout]") {
  if (size() < 2) return;
  auto pg = shared_group();
  const int right = (rank() + 1) % size(), left = (rank() + size() - 1) % size();
  {
    TensorList msg{column_view(dev(floats({rank() + 0.5, -1.0})))};
    Tensor col = column_view(dev(zeros({2})));
    TensorList buf{col};
    auto s = pg->send(msg, right, 0);
    auto r = pg->recv(buf, left, 0);
    r->wait();
    s->wait();
    CHECK_THAT(col.contiguous(), Equals(floats({left + 0.5, -1.0})));
  }
  {
    TensorList msg{dev(ints({rank() % 2, 1, 0}, DType::Bool))};
    Tensor b = dev(zeros({3}, DType::Bool));
    TensorList buf{b};
    auto s = pg->send(msg, right, 1);
    pg->recv(buf, left, 1)->wait();
    s->wait();
    CHECK_THAT(b, Equals(ints({left % 2, 1, 0}, DType::Bool)));
  }
  {
    TensorList msg{dev(floats({rank() + 0.25, 3.0}, DType::BFloat16))};
    Tensor h = dev(zeros({2}, DType::BFloat16));
    TensorList buf{h};
    auto s = pg->send(msg, right, 2);
    pg->recv(buf, left, 2)->wait();
    s->wait();
    CHECK_THAT(h, Equals(floats({left + 0.25, 3.0}, DType::BFloat16)));
  }
  {
    const int64_t n = 1 << 20;
    TensorList msg{dev(full({n}, double(rank())))};
    Tensor big = dev(zeros({n}));
    TensorList buf{big};
    auto s = pg->send(msg, right, 3);
    pg->recv(buf, left, 3)->wait();
    s->wait();
    CHECK_THAT(big, Equals(full({n}, double(left))));
  }
}

TEST_CASE_METHOD(MpFixture, "send/recv: argument checks happen before anything is posted", "[p2p][checks]") {
  auto pg = shared_group();
  TensorList one{dev(zeros({1}))};
  TensorList two{dev(zeros({1})), dev(zeros({1}))};
  CHECK_THROWS_AS(pg->send(one, size(), 0), InvalidArgument);
  CHECK_THROWS_AS(pg->send(one, -1, 0), InvalidArgument);
  CHECK_THROWS_AS(pg->recv(one, size(), 0), InvalidArgument);
  CHECK_THROWS_AS(pg->recv(one, -2, 0), InvalidArgument);
  CHECK_THROWS_WITH(pg->send(one, rank(), 0), Contains("invalid destination rank"));
  CHECK_THROWS_WITH(pg->recv(one, rank(), 0), Contains("invalid source rank"));
  CHECK_THROWS_WITH(pg->send(two, (rank() + 1) % size(), 0), Contains("requires a single-element tensor list"));
  CHECK_THROWS_AS(pg->send(one, (rank() + 1) % size(), -1), InvalidArgument);
  // The group is still usable.
  TensorList xs{dev(ints({1}))};
  finish(pg->allreduce(xs));
  CHECK_THAT(xs[0], Equals(ints({size()})));
}
