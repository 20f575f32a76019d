// The stress cases of torch's test_c10d_gloo.py (test_*_stress): many ops in flight on a group with 8 worker threads (gloo's
// `threads`; other engines ignore it), issued without waiting and then waited in issue order. The caller
// keeps no inputs alive beyond its own tensors: braid must hold them for each op's lifetime.
//
// BRAID_MP_STRESS_ITERS sets the iteration count (default 1000, torch's); scatter, gather and reduce
// issue one op per root per iteration, as torch's tests do.
#include <chrono>
#include <thread>

#include "base/env.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;

namespace {

int iterations() { return static_cast<int>(env::get_int("BRAID_MP_STRESS_ITERS", 1000)); }

GroupOptions stress_options() {
  GroupOptions o;
  o.threads = 8;
  return o;
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "stress: broadcast, 1000 in flight, rotating roots", "[stress][broadcast]") {
  auto pg = make_group(stress_options());
  const int n = iterations(), ws = size();
  std::vector<Tensor> inputs;
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < n; ++i) {
    inputs.push_back(dev(ints({int64_t{i} * ws + rank()})));
    TensorList l{inputs.back()};
    BroadcastOptions o;
    o.root_rank = i % ws;
    works.push_back(pg->broadcast(l, o));
  }
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    works[static_cast<size_t>(i)]->wait();
    if (inputs[static_cast<size_t>(i)].cpu().item<int64_t>() != int64_t{i} * ws + i % ws) {
      if (bad++ < 5) CHECK_THAT(inputs[static_cast<size_t>(i)], Equals(ints({int64_t{i} * ws + i % ws})));
    }
  }
  CHECK(bad == 0);
}

TEST_CASE_METHOD(MpFixture, "stress: allreduce, 1000 in flight", "[stress][allreduce]") {
  auto pg = make_group(stress_options());
  const int n = iterations(), ws = size();
  std::vector<Tensor> inputs;
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < n; ++i) {
    inputs.push_back(dev(ints({i + rank()})));
    TensorList l{inputs.back()};
    works.push_back(pg->allreduce(l));
  }
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    works[static_cast<size_t>(i)]->wait();
    const int64_t want = int64_t{i} * ws + ws * (ws - 1) / 2;
    if (inputs[static_cast<size_t>(i)].cpu().item<int64_t>() != want && bad++ < 5) {
      CHECK_THAT(inputs[static_cast<size_t>(i)], Equals(ints({want})));
    }
  }
  CHECK(bad == 0);
}

TEST_CASE_METHOD(MpFixture, "stress: allreduce_coalesced, 1000 lists of two in flight", "[stress][allreduce_coalesced]") {
  auto pg = make_group(stress_options());
  const int n = iterations(), ws = size();
  std::vector<TensorList> lists;
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < n; ++i) {
    lists.push_back({dev(ints({i + rank()})), dev(ints({i + rank()}))});
    works.push_back(pg->allreduce_coalesced(lists.back()));
  }
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    works[static_cast<size_t>(i)]->wait();
    const int64_t want = int64_t{i} * ws + ws * (ws - 1) / 2;
    for (const Tensor& t : lists[static_cast<size_t>(i)]) {
      if (t.cpu().item<int64_t>() != want && bad++ < 5) CHECK_THAT(t, Equals(ints({want})));
    }
  }
  CHECK(bad == 0);
}

TEST_CASE_METHOD(MpFixture, "stress: scatter, 1000 x ws in flight, every root per iteration", "[stress][scatter]") {
  auto pg = make_group(stress_options());
  const int n = iterations(), ws = size();
  std::vector<Tensor> outputs;
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < n; ++i) {
    for (int root = 0; root < ws; ++root) {
      std::vector<TensorList> ins;
      if (rank() == root) ins.push_back(TensorList(static_cast<size_t>(ws), dev(ints({i + root}))));
      outputs.push_back(dev(ints({-1})));
      TensorList outs{outputs.back()};
      ScatterOptions o;
      o.root_rank = root;
      works.push_back(pg->scatter(outs, ins, o));
    }
  }
  int bad = 0;
  for (size_t k = 0; k < works.size(); ++k) {
    works[k]->wait();
    const int64_t want = static_cast<int64_t>(k) / ws + static_cast<int64_t>(k) % ws;
    if (outputs[k].cpu().item<int64_t>() != want && bad++ < 5) CHECK_THAT(outputs[k], Equals(ints({want})));
  }
  CHECK(bad == 0);
}

TEST_CASE_METHOD(MpFixture, "stress: gather, 1000 x ws in flight, every root per iteration", "[stress][gather]") {
  auto pg = make_group(stress_options());
  const int n = iterations(), ws = size();
  std::vector<std::vector<TensorList>> outputs;
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < n; ++i) {
    for (int root = 0; root < ws; ++root) {
      outputs.emplace_back();
      if (rank() == root) {
        outputs.back().emplace_back();
        for (int k = 0; k < ws; ++k) outputs.back()[0].push_back(dev(ints({-1})));
      }
      TensorList ins{dev(ints({i + rank()}))};
      GatherOptions o;
      o.root_rank = root;
      works.push_back(pg->gather(outputs.back(), ins, o));
    }
  }
  int bad = 0;
  for (size_t k = 0; k < works.size(); ++k) {
    works[k]->wait();
    const int i = static_cast<int>(k) / ws, root = static_cast<int>(k) % ws;
    if (rank() != root) continue;
    for (int j = 0; j < ws; ++j) {
      const Tensor& t = outputs[k][0][static_cast<size_t>(j)];
      if (t.cpu().item<int64_t>() != i + j && bad++ < 5) CHECK_THAT(t, Equals(ints({i + j})));
    }
  }
  CHECK(bad == 0);
}

TEST_CASE_METHOD(MpFixture, "stress: allgather, 1000 in flight", "[stress][allgather]") {
  auto pg = make_group(stress_options());
  const int n = iterations(), ws = size();
  std::vector<std::vector<TensorList>> outputs;
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < n; ++i) {
    outputs.emplace_back(1);
    for (int k = 0; k < ws; ++k) outputs.back()[0].push_back(dev(ints({-1})));
    TensorList ins{dev(ints({i + rank()}))};  // dropped by the caller right after the call
    works.push_back(pg->allgather(outputs.back(), ins));
  }
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    works[static_cast<size_t>(i)]->wait();
    for (int j = 0; j < ws; ++j) {
      const Tensor& t = outputs[static_cast<size_t>(i)][0][static_cast<size_t>(j)];
      if (t.cpu().item<int64_t>() != i + j && bad++ < 5) CHECK_THAT(t, Equals(ints({i + j})));
    }
  }
  CHECK(bad == 0);
}

TEST_CASE_METHOD(MpFixture, "stress: reduce, 1000 x ws in flight, every root per iteration", "[stress][reduce]") {
  auto pg = make_group(stress_options());
  const int n = iterations(), ws = size();
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < n; ++i) {
    for (int root = 0; root < ws; ++root) {
      tensors.push_back(dev(ints({i + rank()})));
      TensorList l{tensors.back()};
      ReduceOptions o;
      o.root_rank = root;
      works.push_back(pg->reduce(l, o));
    }
  }
  int bad = 0;
  for (size_t k = 0; k < works.size(); ++k) {
    works[k]->wait();
    const int i = static_cast<int>(k) / ws, root = static_cast<int>(k) % ws;
    if (rank() != root) continue;
    const int64_t want = int64_t{i} * ws + ws * (ws - 1) / 2;
    if (tensors[k].cpu().item<int64_t>() != want && bad++ < 5) CHECK_THAT(tensors[k], Equals(ints({want})));
  }
  CHECK(bad == 0);
}

TEST_CASE_METHOD(MpFixture, "stress: mixed collectives and p2p in flight, then one barrier", "[stress]") {
  auto pg = make_group(stress_options());
  const int n = iterations() / 4, ws = size();
  std::vector<Tensor> sums, bcasts, recvd;
  std::vector<std::shared_ptr<Work>> p2p;
  const int right = (rank() + 1) % ws, left = (rank() + ws - 1) % ws;
  for (int i = 0; i < n; ++i) {
    sums.push_back(dev(ints({i})));
    TensorList a{sums.back()};
    pg->allreduce(a);
    bcasts.push_back(dev(ints({rank() == i % ws ? i : -1})));
    TensorList b{bcasts.back()};
    BroadcastOptions o;
    o.root_rank = i % ws;
    pg->broadcast(b, o);
    if (ws > 1) {
      TensorList s{dev(ints({rank() * 10000 + i}))};
      p2p.push_back(pg->send(s, right, i));
      recvd.push_back(dev(ints({-1})));
      TensorList r{recvd.back()};
      p2p.push_back(pg->recv(r, left, i));
    }
  }
  pg->barrier()->wait();
  for (auto& w : p2p) w->wait();
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    if (sums[static_cast<size_t>(i)].cpu().item<int64_t>() != int64_t{i} * ws) ++bad;
    if (bcasts[static_cast<size_t>(i)].cpu().item<int64_t>() != i) ++bad;
    if (ws > 1 && recvd[static_cast<size_t>(i)].cpu().item<int64_t>() != left * 10000 + i) ++bad;
  }
  CHECK(bad == 0);
}

namespace {

// ws blocks of m int32 elements, block k holding a * k + b.
Tensor blocks(int ws, int64_t m, int32_t a, int32_t b) {
  const Tensor k = arange(0, ws, 1, DType::Int32).view({ws, 1}).expand({ws, m}).contiguous().view({ws * m});
  return braid::add(braid::mul(k, Scalar(a)), Scalar(b));
}

}  // namespace

// Multi-step algorithms (gloo: ring allreduce and allgather over 1 MiB, the reduce_scatter ring, the
// one-step alltoall) in flight at once on every lane. gloo's lanes share one context, so their messages
// meet on the same sockets and only the ops' tags keep them apart; what must stay per lane (the
// reduce_scatter ring's receive buffers) must not be shared: with one lane's scratch used by all, this
// case failed on 4 ranks.
TEST_CASE_METHOD(MpFixture, "stress: large multi-step collectives in flight on every lane", "[stress][lanes]") {
  auto pg = make_group(stress_options());
  const int ws = size(), rounds = 4;
  const int64_t n = 512 * 1024;  // int32 elements: 2 MiB buffers and 2 MiB blocks for allgather, reduce_scatter
  struct Round {
    Tensor sum, gathered, scattered, exchanged;
  };
  std::vector<Round> out;
  std::vector<std::shared_ptr<Work>> works;
  // The last rank comes late, so that on the others every lane has started its op and waits in it: the
  // ops are then in flight together for certain, not one after another.
  if (rank() == ws - 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (int i = 0; i < rounds; ++i) {
    Round r;
    r.sum = dev(full({n}, Scalar(int32_t(rank() + i)), DType::Int32));
    TensorList sum{r.sum};
    works.push_back(pg->allreduce(sum));
    Tensor block = dev(full({n}, Scalar(int32_t(10 * rank() + i)), DType::Int32));
    r.gathered = dev(full({n * ws}, Scalar(int32_t(-1)), DType::Int32));
    works.push_back(pg->allgather_into_tensor(r.gathered, block));
    // Block k of rank q's input holds k + q + i: rank k's reduced block is ws * (k + i) + ws(ws-1)/2.
    Tensor input = dev(blocks(ws, n, 1, rank() + i));
    r.scattered = dev(full({n}, Scalar(int32_t(-1)), DType::Int32));
    works.push_back(pg->reduce_scatter_tensor(r.scattered, input));
    // Block k of rank q's input holds k + 100 * q + 1000 * i: rank k receives that from every rank q.
    Tensor to_send = dev(blocks(ws, n / ws, 1, 100 * rank() + 1000 * i));
    r.exchanged = dev(full({ws * (n / ws)}, Scalar(int32_t(-1)), DType::Int32));
    works.push_back(pg->alltoall_single(r.exchanged, to_send, {}, {}));
    out.push_back(std::move(r));
  }
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();  // the last issued first
  for (int i = 0; i < rounds; ++i) {
    const Round& r = out[static_cast<size_t>(i)];
    CHECK_THAT(r.sum, Equals(full({n}, Scalar(int32_t(ws * i + ws * (ws - 1) / 2)), DType::Int32)));
    CHECK_THAT(r.gathered, Equals(blocks(ws, n, 10, i)));
    CHECK_THAT(r.scattered, Equals(full({n}, Scalar(int32_t(ws * (rank() + i) + ws * (ws - 1) / 2)), DType::Int32)));
    CHECK_THAT(r.exchanged, Equals(blocks(ws, n / ws, 100, rank() + 1000 * i)));
  }
}
