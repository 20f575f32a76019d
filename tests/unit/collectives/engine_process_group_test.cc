// EngineProcessGroup on its own: a one-rank fake engine (whose primitives are copies) shows the packing
// (lists, views, bool, half types, AVG/PREMUL_SUM), the op life cycle (sequence numbers, errors that
// name the op, sticky failure, barrier implies wait) and sparse allreduce without any real engine.
#include <catch2/catch.hpp>

#include <algorithm>

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <mutex>
#include <thread>
#include <vector>

#include "base/check.h"
#include "collectives/queue/engine_process_group.h"
#include "store/hash_store.h"
#include "tensor/compare.h"
#include "tests/support/temp_dir.h"
#include "tests/support/threads.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/sparse.h"

namespace braid::collectives {
namespace {

// What the tests set and read of the fake engine.
struct Probe {
  std::atomic<bool> fail_next{false};
  std::atomic<int> slow_ms{0};
  std::atomic<int> allreduces{0};
  // Runs inside each allreduce when set (set before the op is posted).
  std::function<void()> in_allreduce;
  // Which thread ran each allreduce, and its sequence number, in the order they ran.
  std::mutex ran_mu;
  std::vector<std::thread::id> ran_on;
  std::vector<uint64_t> ran_seq;
};

// A one-rank engine whose primitives are copies.
class FakeEngine final : public Engine {
 public:
  FakeEngine(Probe& probe, int lanes) : probe_(probe), lanes_(lanes) {}
  std::string_view name() const override { return "fake"; }
  int lanes() const override { return lanes_; }

  bool broadcast(Tensor&, int, const OpContext& ctx) override { return maybe_misbehave(ctx); }
  bool allreduce(Tensor&, EngineOp, const OpContext& ctx) override {
    maybe_misbehave(ctx);
    if (probe_.in_allreduce) probe_.in_allreduce();
    ++probe_.allreduces;
    std::lock_guard<std::mutex> lock(probe_.ran_mu);
    probe_.ran_on.push_back(std::this_thread::get_id());
    probe_.ran_seq.push_back(ctx.seq);
    return true;
  }
  bool reduce(Tensor&, EngineOp, int, const OpContext& ctx) override { return maybe_misbehave(ctx); }
  bool allgather(const Tensor& in, Tensor& out, const OpContext& ctx) override {
    maybe_misbehave(ctx);
    out.copy_(in);
    return true;
  }
  bool gather(const Tensor& in, Tensor& out, int, const OpContext&) override { return copy(in, out); }
  bool scatter(const Tensor& in, Tensor& out, int, const OpContext&) override { return copy(in, out); }
  bool reduce_scatter(const Tensor& in, Tensor& out, EngineOp, const OpContext&) override { return copy(in, out); }
  bool alltoall(const Tensor& in, Tensor& out, const std::vector<int64_t>&, const std::vector<int64_t>&,
                const std::vector<int64_t>&, const std::vector<int64_t>&, const OpContext&) override {
    return copy(in, out);
  }
  bool barrier(const OpContext& ctx) override { return maybe_misbehave(ctx); }
  void post_send(const Tensor&, int, int, const Deadline&, std::shared_ptr<Work> work) override { work->finish({}); }
  void post_recv(Tensor&, int, int, const Deadline&, std::shared_ptr<Work> work) override { work->finish({}); }

 private:
  bool maybe_misbehave(const OpContext& ctx) {
    if (probe_.slow_ms.load() > 0) std::this_thread::sleep_for(Millis(probe_.slow_ms.load()));
    if (probe_.fail_next.exchange(false)) BRAID_THROW(TimeoutError, "fake engine: peer did not answer in {}", ctx.what);
    return true;
  }
  static bool copy(const Tensor& in, Tensor& out) {
    out.copy_(in);
    return true;
  }
  Probe& probe_;
  const int lanes_;
};

// A group of one rank on the fake engine; `pg->op(...)` calls the group, `pg.probe` watches the engine.
struct FakeGroup {
  explicit FakeGroup(int lanes = 1, std::shared_ptr<store::Store> store = nullptr)
      : FakeGroup(lanes, config_with(std::move(store))) {}
  explicit FakeGroup(EngineProcessGroup::Config config, int lanes = 1) : FakeGroup(lanes, std::move(config)) {}
  FakeGroup(int lanes, EngineProcessGroup::Config config)
      : probe(std::make_unique<Probe>()),
        group(std::make_shared<EngineProcessGroup>(GroupShape{0, 1, "fake"},
                                                   std::make_unique<FakeEngine>(*probe, lanes), nullptr,
                                                   std::move(config))) {}
  static EngineProcessGroup::Config config_with(std::shared_ptr<store::Store> store) {
    EngineProcessGroup::Config config;
    config.store = std::move(store);
    config.timeout = Millis(5000);
    return config;
  }
  EngineProcessGroup* operator->() const { return group.get(); }

  std::unique_ptr<Probe> probe;  // first: the engine (inside the group) refers to it
  std::shared_ptr<EngineProcessGroup> group;
};

AllreduceOptions with_op(ReduceOp op) {
  AllreduceOptions o;
  o.reduce_op = op;
  return o;
}

Tensor column_view(std::vector<float> values) {
  // A stride-2 view, as torch's test_gather_noncontiguous_input builds them: t.expand(2, 2).contiguous()[:, 0].
  const auto n = static_cast<int64_t>(values.size());
  Tensor wide = zeros({n, 2});
  wide.select(1, 0).copy_(from_vector(values, {n}));
  return wide.select(1, 0);
}

}  // namespace

TEST_CASE("allreduce of a list reduces locally and writes every tensor", "[collectives][queued]") {
  FakeGroup pg;
  TensorList ts{from_vector<float>({1, 2}, {2}), column_view({10, 20})};
  pg->allreduce(ts)->wait();
  CHECK(to_vector<float>(ts[0]) == std::vector<float>{11, 22});
  CHECK(to_vector<float>(ts[1].contiguous()) == std::vector<float>{11, 22});

  TensorList mx{from_vector<int32_t>({1, 9}, {2}), from_vector<int32_t>({5, 3}, {2})};
  pg->allreduce(mx, with_op(ReduceOp::MAX))->wait();
  CHECK(to_vector<int32_t>(mx[1]) == std::vector<int32_t>{5, 9});
}

TEST_CASE("bool reductions are logical and half types run in float32", "[collectives][queued]") {
  FakeGroup pg;
  TensorList b{from_vector<bool>({true, false, false}, {3}), from_vector<bool>({false, false, true}, {3})};
  pg->allreduce(b)->wait();  // SUM on bool = logical or
  CHECK(b[0].dtype() == DType::Bool);
  CHECK(to_vector<bool>(b[0]) == std::vector<bool>{true, false, true});
  TensorList p{from_vector<bool>({true, true}, {2}), from_vector<bool>({true, false}, {2})};
  pg->allreduce(p, with_op(ReduceOp::PRODUCT))->wait();  // logical and
  CHECK(to_vector<bool>(p[0]) == std::vector<bool>{true, false});

  // 2048 + 1 + 1 in float16 pairwise would round to 2048 twice; float32 accumulation gives 2050.
  TensorList h{full({1}, 2048.0, DType::Float16), full({1}, 1.0, DType::Float16), full({1}, 1.0, DType::Float16)};
  pg->allreduce(h)->wait();
  CHECK(h[0].dtype() == DType::Float16);
  CHECK(h[0].item<double>() == 2050.0);
}

TEST_CASE("AVG and PREMUL_SUM scale around the sum", "[collectives][queued]") {
  FakeGroup pg;
  TensorList a{from_vector<double>({2, 4}, {2}), from_vector<double>({4, 8}, {2})};
  pg->allreduce(a, with_op(ReduceOp::AVG))->wait();  // one rank: the average is the local sum
  CHECK(to_vector<double>(a[0]) == std::vector<double>{6, 12});
  TensorList p{from_vector<float>({1, 2}, {2})};
  pg->allreduce(p, with_op(ReduceOp::premul_sum(0.5)))->wait();
  CHECK(to_vector<float>(p[0]) == std::vector<float>{0.5f, 1.0f});
  TensorList i{from_vector<int64_t>({1}, {1})};
  CHECK_THROWS_WITH(pg->allreduce(i, with_op(ReduceOp::AVG)),
                    Catch::Contains("unsupported reduction operation") && Catch::Contains("group 'fake'"));
}

TEST_CASE("sequence numbers count queued collectives, not point-to-point", "[collectives][queued]") {
  FakeGroup pg;
  CHECK(pg->sequence_number() == 0);
  TensorList t{ones({2})};
  pg->allreduce(t)->wait();
  pg->broadcast(t)->wait();
  CHECK(pg->sequence_number() == 2);
  CHECK_THROWS_WITH(pg->send(t, 0, 0), Catch::Contains("invalid destination rank"));
  CHECK(pg->sequence_number() == 2);
}

TEST_CASE("a failed op names itself and breaks the group", "[collectives][queued]") {
  FakeGroup pg;
  TensorList t{ones({2})};
  pg.probe->fail_next = true;
  auto w = pg->allreduce(t);
  CHECK_THROWS_AS(w->wait(), TimeoutError);
  CHECK_THROWS_WITH(w->wait(), Catch::Contains("allreduce #1 on group 'fake' (rank 0/1, fake)") &&
                                   Catch::Contains("timed out after"));
  CHECK(w->is_completed());
  CHECK(w->exception() != nullptr);
  CHECK_THROWS_AS(pg->allreduce(t), CommError);
  CHECK_THROWS_WITH(pg->broadcast(t), Catch::Contains("broken") && Catch::Contains("allreduce #1"));
}

TEST_CASE("barrier completes only after earlier ops on every lane", "[collectives][queued]") {
  FakeGroup pg(/*lanes=*/2);
  pg.probe->slow_ms = 100;
  TensorList t{ones({4})};
  auto first = pg->allreduce(t);  // seq 1 -> lane 1
  pg.probe->slow_ms = 0;
  auto b = pg->barrier();  // seq 2 -> lane 0
  b->wait();
  CHECK(first->is_completed());
}

TEST_CASE("dropping a Work handle neither cancels nor leaks the op", "[collectives][queued]") {
  FakeGroup pg;
  for (int i = 0; i < 16; ++i) {
    TensorList t{full({8}, static_cast<double>(i))};
    pg->allreduce(t);  // handle dropped at once
  }
  pg->barrier()->get_future().wait(Millis(5000));
  CHECK(pg.probe->allreduces.load() == 16);
}

TEST_CASE("gather, scatter and alltoall stage non-contiguous tensors", "[collectives][queued]") {
  FakeGroup pg;
  TensorList in{column_view({3, 4})};
  std::vector<TensorList> out{{zeros({2})}};
  auto w = pg->gather(out, in);
  w->wait();
  CHECK(to_vector<float>(out[0][0]) == std::vector<float>{3, 4});
  CHECK(w->result().size() == 1);

  Tensor dst = column_view({0, 0});
  Tensor src = from_vector<float>({7, 8}, {2});
  pg->allgather_into_tensor(dst, src)->wait();
  CHECK(to_vector<float>(dst.contiguous()) == std::vector<float>{7, 8});

  Tensor a2a_out = zeros({2});
  Tensor a2a_in = column_view({5, 6});
  pg->alltoall_single(a2a_out, a2a_in, {}, {})->wait();
  CHECK(to_vector<float>(a2a_out) == std::vector<float>{5, 6});
}

TEST_CASE("sparse allreduce sums COO tensors and keeps them sparse", "[collectives][queued]") {
  FakeGroup pg;
  SparseTensor a(from_vector<int64_t>({0, 2}, {1, 2}), from_vector<float>({1, 2}, {2}), {4});
  SparseTensor b(from_vector<int64_t>({2, 3}, {1, 2}), from_vector<float>({10, 20}, {2}), {4});
  TensorList ts{a.to_tensor(), b.to_tensor()};
  pg->allreduce(ts)->wait();
  REQUIRE(ts[0].is_sparse());
  CHECK(to_vector<float>(ts[0].sparse().to_dense()) == std::vector<float>{1, 0, 12, 20});
  TensorList bad{a.to_tensor()};
  CHECK_THROWS_WITH(pg->allreduce(bad, with_op(ReduceOp::MAX)), Catch::Contains("unsupported reduction operation"));
}

TEST_CASE("monitored_barrier passes when every rank arrives", "[collectives][queued]") {
  FakeGroup pg(1, std::make_shared<store::HashStore>());
  CHECK_NOTHROW(pg->monitored_barrier(Millis(1000)));
  FakeGroup no_store;
  CHECK_THROWS_WITH(no_store->monitored_barrier(), Catch::Contains("needs a store"));
}

// ---- who runs an op: the lane's thread, or the thread that waits for it (Work::Helper) ----

TEST_CASE("post-and-wait runs ops on the waiting thread, in issue order", "[collectives][queued][helper]") {
  FakeGroup pg;
  TensorList t{ones({4})};
  for (int i = 0; i < 200; ++i) pg->allreduce(t)->wait();
  std::lock_guard<std::mutex> lock(pg.probe->ran_mu);
  REQUIRE(pg.probe->ran_seq.size() == 200);
  for (size_t i = 0; i < pg.probe->ran_seq.size(); ++i) CHECK(pg.probe->ran_seq[i] == i + 1);
  // The lane's thread may win the race now and then; a caller that waits at once must win most of it.
  const auto on_caller = std::count(pg.probe->ran_on.begin(), pg.probe->ran_on.end(), std::this_thread::get_id());
  INFO(on_caller << " of 200 ran on the caller");
  CHECK(on_caller > 0);
}

TEST_CASE("waiting for a later op runs the earlier queued ones first", "[collectives][queued][helper]") {
  FakeGroup pg;
  TensorList t{ones({4})};
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < 10; ++i) works.push_back(pg->allreduce(t));
  works.back()->wait();
  for (const auto& w : works) CHECK(w->is_completed());
  std::lock_guard<std::mutex> lock(pg.probe->ran_mu);
  REQUIRE(pg.probe->ran_seq.size() == 10);
  for (size_t i = 0; i < 10; ++i) CHECK(pg.probe->ran_seq[i] == i + 1);
}

TEST_CASE("an op nobody waits for still runs after the caller ran earlier ones", "[collectives][queued][helper]") {
  FakeGroup pg;
  TensorList t{ones({4})};
  for (int i = 0; i < 20; ++i) pg->allreduce(t)->wait();  // the lane now expects its caller to wait
  auto unwaited = pg->allreduce(t);
  // Polled, never waited: the lane's thread must start it on its own.
  for (int i = 0; i < 500 && !unwaited->is_completed(); ++i) std::this_thread::sleep_for(Millis(10));
  CHECK(unwaited->is_completed());
  // And once the caller waits again, a fresh op is still fine on both paths.
  pg->allreduce(t)->wait();
  CHECK(pg.probe->allreduces.load() == 22);
}

TEST_CASE("the group's watcher starts unwaited ops on every lane, before and after idling",
          "[collectives][queued][helper]") {
  FakeGroup pg(/*lanes=*/2);
  TensorList t{ones({4})};
  const auto poll_done = [](const std::vector<std::shared_ptr<Work>>& works) {
    for (int i = 0; i < 500; ++i) {
      if (std::all_of(works.begin(), works.end(), [](const auto& w) { return w->is_completed(); })) return true;
      std::this_thread::sleep_for(Millis(10));
    }
    return false;
  };
  for (int i = 0; i < 20; ++i) pg->allreduce(t)->wait();  // both lanes in waiter mode
  CHECK(poll_done({pg->allreduce(t), pg->allreduce(t)}));   // one op on each lane, never waited
  for (int i = 0; i < 20; ++i) pg->allreduce(t)->wait();
  std::this_thread::sleep_for(Millis(100));  // past the idle limit: the lanes leave waiter mode
  CHECK(poll_done({pg->allreduce(t), pg->allreduce(t)}));
  CHECK(pg.probe->allreduces.load() == 44);
}

TEST_CASE("a caller that posts again before its last op ran has both started without waiting for the watcher",
          "[collectives][queued][helper]") {
  // The watcher would look only after 3 s: within the test's 1 s only enqueue() can start these ops.
  EngineProcessGroup::Config config;
  config.unclaimed_after = Millis(3000);
  config.look_gap_max = Millis(3000);
  FakeGroup pg(config);
  TensorList t{ones({4})};
  for (int i = 0; i < 20; ++i) pg->allreduce(t)->wait();  // the lane now expects its caller to wait
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<Work>> works{pg->allreduce(t), pg->allreduce(t)};  // posted ahead, never waited
  while (std::chrono::steady_clock::now() - t0 < Millis(1000) &&
         !(works[0]->is_completed() && works[1]->is_completed())) {
    std::this_thread::sleep_for(Millis(1));
  }
  CHECK(works[0]->is_completed());
  CHECK(works[1]->is_completed());
  // Back to post-and-wait: the caller runs its ops again.
  for (int i = 0; i < 20; ++i) pg->allreduce(t)->wait();
  CHECK(pg.probe->allreduces.load() == 42);
}

TEST_CASE("an op nobody waits for starts within the watcher's longest gap after a long post-and-wait stretch",
          "[collectives][queued][helper]") {
  FakeGroup pg;  // defaults: looks back off from 1 ms to 8 ms while they find nothing queued
  TensorList t{ones({4})};
  // 60 ms of post-and-wait, never 20 ms without an op (the lane stays in waiter mode): the gap is at its
  // longest by the end.
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < Millis(60)) {
    pg->allreduce(t)->wait();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const auto posted = std::chrono::steady_clock::now();
  auto unwaited = pg->allreduce(t);
  while (!unwaited->is_completed() && std::chrono::steady_clock::now() - posted < Millis(5000)) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  REQUIRE(unwaited->is_completed());
  // 8 ms at most in theory; the bound leaves room for a loaded machine.
  CHECK(std::chrono::steady_clock::now() - posted < Millis(500));
}

TEST_CASE("waiter mode's timings are checked", "[collectives][queued]") {
  EngineProcessGroup::Config zero;
  zero.unclaimed_after = std::chrono::microseconds(0);
  CHECK_THROWS_WITH(FakeGroup(zero), Catch::Contains("waiter mode needs 0 < unclaimed_after <= look_gap_max"));
  EngineProcessGroup::Config shorter;
  shorter.look_gap_max = std::chrono::microseconds(500);
  CHECK_THROWS_AS(FakeGroup(shorter), InvalidArgument);
}

TEST_CASE("a group's lane threads keep the default policy, its watcher runs SCHED_BATCH", "[collectives][queued]") {
  const auto before = braid::testing::thread_ids();
  FakeGroup pg(/*lanes=*/3);
  auto policies = braid::testing::new_thread_policies(before);
  std::sort(policies.begin(), policies.end());
  // Three lanes that run ops, the health monitor's thread (the stall watchdog is on by default), and one
  // watcher whose looks must not preempt a waiter running an op. The watcher sets its own policy when it
  // starts: wait for that.
  for (int i = 0; i < 500 && std::count(policies.begin(), policies.end(), SCHED_BATCH) == 0; ++i) {
    std::this_thread::sleep_for(Millis(2));
    policies = braid::testing::new_thread_policies(before);
    std::sort(policies.begin(), policies.end());
  }
  CHECK(policies == std::vector<int>{SCHED_OTHER, SCHED_OTHER, SCHED_OTHER, SCHED_OTHER, SCHED_BATCH});
}

TEST_CASE("wait(timeout) does not run an op that could outlast it", "[collectives][queued][helper]") {
  FakeGroup pg;
  pg.probe->slow_ms = 300;
  TensorList t{ones({4})};
  auto w = pg->allreduce(t);  // the group's timeout (5 s) is far beyond the wait's 50 ms
  CHECK_THROWS_AS(w->wait(Millis(50)), TimeoutError);
  w->wait();  // the lane's thread finishes it
  CHECK(w->is_success());
}

TEST_CASE("waiters on several lanes and threads each get their op", "[collectives][queued][helper]") {
  FakeGroup pg(/*lanes=*/2);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  std::mutex post_mu;  // ops are issued one at a time (ProcessGroup's ordering rule); waits overlap
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        TensorList t{ones({4})};
        std::shared_ptr<Work> w;
        {
          std::lock_guard<std::mutex> lock(post_mu);
          w = pg->allreduce(t);
        }
        w->wait();
        if (w->is_success()) ++ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(ok.load() == 200);
  pg->barrier()->wait();
  std::lock_guard<std::mutex> lock(pg.probe->ran_mu);
  CHECK(pg.probe->ran_seq.size() == 200);
}

TEST_CASE("the flight recorder follows each op: sizes, dtype, completed or failed", "[collectives][trace]") {
  FakeGroup pg;
  TensorList two{ones({2}), ones({2})};
  pg->allreduce(two)->wait();
  TensorList one{ones({4}, TensorOptions(DType::Float64, Device::cpu()))};
  pg.probe->fail_next = true;
  CHECK_THROWS_AS(pg->broadcast(one)->wait(), TimeoutError);
  const auto es = pg->recorder().entries();
  REQUIRE(es.size() == 2);
  CHECK(std::string(es[0].op) == "allreduce");
  CHECK(es[0].io.in_numel == 2);  // the first tensor is the op's (torch reduces tensors[0])
  CHECK(es[0].state == TraceState::Completed);
  CHECK(std::string(es[1].op) == "broadcast");
  CHECK(es[1].io.dtype == DType::Float64);
  CHECK(es[1].state == TraceState::Failed);
}

TEST_CASE("the stall watchdog notes an op stuck past stall_warn and dumps the recorder", "[collectives][trace]") {
  testing::TempDir dir("stall");
  ::setenv("BRAID_TRACE_DIR", dir.path().c_str(), 1);
  auto config = FakeGroup::config_with(std::make_shared<store::HashStore>());
  config.stall_warn = Millis(100);
  config.timeout = Millis(60'000);
  FakeGroup pg(config);
  // The op returns once a dump appeared, which only the watchdog writes here (or after 30 s, and then the
  // checks below fail): no timing is asserted.
  const auto dumped = [&] {
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
      if (e.path().filename().string().rfind("rank-", 0) == 0) return e.path();
    }
    return std::filesystem::path();
  };
  pg.probe->in_allreduce = [&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (dumped().empty() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  TensorList t{ones({2})};
  pg->allreduce(t)->wait();
  ::unsetenv("BRAID_TRACE_DIR");
  const auto path = dumped();
  REQUIRE(!path.empty());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK_THAT(text.str(), Catch::Contains(R"("reason":"stall")"));
  CHECK_THAT(text.str(), Catch::Contains(R"("name":"fake")"));
  CHECK_THAT(text.str(), Catch::Contains(R"("stalls":[{"seq":1,"op":"allreduce")"));
  CHECK_THAT(text.str(), Catch::Contains(R"("state":"started")"));
}

}  // namespace braid::collectives
