// Work and Future semantics (those of torch's c10d Work and torch.futures.Future): calls return at once, wait() completes them, futures chain with
// then() and wait together, dropped handles neither cancel nor leak an op, and barrier() completes only
// after every earlier op of the group (test_barrier_implies_wait).
#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;

TEST_CASE_METHOD(MpFixture, "work: barrier implies wait, with every handle dropped", "[work][barrier]") {
  auto pg = shared_group();
  const int num = 16;
  std::vector<Tensor> tensors;
  for (int i = 0; i < num; ++i) tensors.push_back(dev(full({100, 100}, double(i))));
  for (auto& t : tensors) {
    TensorList xs{t};
    pg->allreduce(xs);  // the handle is dropped on purpose
  }
  pg->barrier()->get_future().wait(kTestGroupTimeout);
  for (int i = 0; i < num; ++i) {
    INFO("tensor " << i);
    CHECK_THAT(tensors[static_cast<size_t>(i)], Equals(full({100, 100}, double(i * size()))));
  }
}

TEST_CASE_METHOD(MpFixture, "work: barrier waits for earlier ops on every lane", "[work][barrier]") {
  GroupOptions go;
  go.threads = 4;
  auto pg = make_group(go);
  std::vector<Tensor> tensors;
  for (int i = 0; i < 12; ++i) {
    tensors.push_back(dev(full({1 << 14}, int64_t{i}, DType::Int64)));
    TensorList xs{tensors.back()};
    pg->allreduce(xs);
  }
  auto b = pg->barrier();
  b->wait();
  CHECK(b->is_success());
  for (int i = 0; i < 12; ++i) CHECK_THAT(tensors[static_cast<size_t>(i)], Equals(full({1 << 14}, int64_t{i * size()}, DType::Int64)));
}

TEST_CASE_METHOD(MpFixture, "work: is_completed, is_success, exception and the future's value", "[work]") {
  auto pg = shared_group();
  TensorList xs{dev(floats({1.0}))};
  auto w = pg->allreduce(xs);
  w->wait();
  CHECK(w->is_completed());
  CHECK(w->is_success());
  CHECK(w->exception() == nullptr);
  CHECK(w->get_future().completed());
  CHECK(w->get_future().value().at(0).is_same(xs[0]));
  CHECK_THAT(w->result().at(0), Equals(floats({double(size())})));
  CHECK(w->what().find("allreduce") != std::string::npos);
  CHECK(w->what().find(pg->name()) != std::string::npos);
  // wait() on a completed work returns at once, again and again.
  w->wait(Millis(0));
  w->wait();
}

TEST_CASE_METHOD(MpFixture, "work: futures chain with then() and wait together", "[work][future]") {
  auto pg = shared_group();
  const int ws = size();
  // The comm-hook style chaining of torch's tests: allreduce, then +1 on the result, then x2.
  TensorList xs{dev(floats({1.0}))};
  auto fut = pg->allreduce(xs)->get_future();
  auto plus_one = fut.then([](const TensorList& v) { return braid::add(v.at(0), Scalar(1.0)); });
  auto doubled = plus_one.then([](const Tensor& t) { return braid::mul(t, Scalar(2.0)); });
  CHECK_THAT(doubled.value(kTestGroupTimeout), Equals(floats({2.0 * (ws + 1)})));

  // The eager values of torch's CompilerTest: x = ones * r, x += 1, f(x) = 2 * comm(x + x).
  TensorList ys{dev(braid::mul(braid::add(full({2, 2}, double(rank())), Scalar(1.0)), Scalar(2.0)))};
  pg->allreduce(ys)->wait();
  CHECK_THAT(braid::mul(ys[0], Scalar(2.0)), Equals(full({2, 2}, 2.0 * ws * (ws + 1))));

  // Several futures, waited together, complete in issue order with their own values.
  std::vector<Tensor> ts;
  std::vector<Future<TensorList>> futs;
  for (int i = 0; i < 8; ++i) {
    TensorList l{dev(ints({i}))};
    ts.push_back(l[0]);
    futs.push_back(pg->allreduce(l)->get_future());
  }
  const auto values = wait_all(futs, kTestGroupTimeout);
  for (int i = 0; i < 8; ++i) CHECK_THAT(values[static_cast<size_t>(i)].at(0), Equals(ints({i * ws})));
}

TEST_CASE_METHOD(MpFixture, "work: callbacks run once the op completed, on the op's data", "[work][future]") {
  auto pg = shared_group();
  std::atomic<int> calls{0};
  std::promise<bool> saw_result;
  TensorList xs{dev(ints({rank() + 1}))};
  const int64_t want = int64_t{size()} * (size() + 1) / 2;
  auto w = pg->allreduce(xs);
  w->get_future().add_callback([&](const Future<TensorList>& f) {
    calls++;
    saw_result.set_value(!f.has_error() && f.value(Millis(0)).at(0).cpu().item<int64_t>() == want);
  });
  // Callbacks run on the completing thread after waiters are released, so wait for the callback itself.
  auto seen = saw_result.get_future();
  REQUIRE(seen.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
  CHECK(seen.get());
  w->wait();
  CHECK(calls.load() == 1);
}

TEST_CASE_METHOD(MpFixture, "work: ops issued from several threads keep one order per rank", "[work]") {
  auto pg = shared_group();
  // Each rank issues 20 allreduces from 2 threads, but under a mutex in a fixed global order, as the
  // ProcessGroup contract demands; the values check that op i met op i everywhere.
  std::mutex mu;
  int next = 0;
  std::vector<Tensor> ts(20);
  std::vector<std::shared_ptr<Work>> works(20);
  auto issue = [&](int parity) {
    for (;;) {
      std::unique_lock<std::mutex> lock(mu);
      if (next >= 20) return;
      if (next % 2 != parity) {
        lock.unlock();
        std::this_thread::yield();
        continue;
      }
      const int i = next++;
      TensorList l{dev(ints({i}))};
      ts[static_cast<size_t>(i)] = l[0];
      works[static_cast<size_t>(i)] = pg->allreduce(l);
    }
  };
  std::thread a(issue, 0), b(issue, 1);
  a.join();
  b.join();
  for (int i = 0; i < 20; ++i) {
    works[static_cast<size_t>(i)]->wait();
    CHECK_THAT(ts[static_cast<size_t>(i)], Equals(ints({i * size()})));
  }
}
