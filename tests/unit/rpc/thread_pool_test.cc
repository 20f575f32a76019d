// The RPC agent's thread pool: every task runs, a task queued behind one that blocks still starts (the
// watcher hands it to an idle worker), a backlog of blocking tasks reaches every thread, a throwing task
// costs no thread, stop() drops the queue and joins. That short tasks share few threads is a matter of
// speed, measured by `braid bench rpc` (rpc_async calls/s), not asserted here.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "rpc/thread_pool.h"

using braid::rpc::ThreadPool;
using namespace std::chrono_literals;

namespace {

// Every wait has a bound far above what the pool needs (kHelpAfter is 100 us): a starved task fails the
// test, and the tasks that waited for it give up, so that the pool can still be stopped. Each test
// declares its pool after the state its tasks use, so that the pool is stopped first.
constexpr auto kLimit = 20s;

template <class T>
bool ready_within(std::future<T>& f) {
  return f.wait_for(2 * kLimit) == std::future_status::ready;
}

// A latch whose waiters give up at kLimit; arrive_and_wait says whether everyone came.
class Gate {
 public:
  explicit Gate(int n) : left_(n) {}
  bool arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (--left_ == 0) cv_.notify_all();
    return cv_.wait_for(lock, kLimit, [&] { return left_ <= 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

}  // namespace

TEST_CASE("thread pool: every task submitted runs, from many submitting threads", "[rpc][pool]") {
  constexpr int kPerThread = 5000;
  std::atomic<int> ran{0};
  std::promise<void> all;
  ThreadPool pool(4, "test pool");
  std::vector<std::thread> submitters;
  for (int t = 0; t < 3; ++t) {
    submitters.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        pool.submit([&] {
          if (ran.fetch_add(1) + 1 == 3 * kPerThread) all.set_value();
        });
      }
    });
  }
  for (auto& s : submitters) s.join();
  auto done = all.get_future();
  REQUIRE(ready_within(done));
  CHECK(ran.load() == 3 * kPerThread);
}

TEST_CASE("thread pool: a task queued behind one that waits for it still runs", "[rpc][pool]") {
  // The first task blocks until the second has run: with one worker awake and the second merely queued
  // behind it, this deadlocks unless an idle worker takes the second.
  std::promise<void> second_ran;
  auto second = second_ran.get_future().share();
  std::promise<bool> first_done;
  ThreadPool pool(2, "test pool");
  pool.submit([&, second] { first_done.set_value(second.wait_for(kLimit) == std::future_status::ready); });
  pool.submit([&] { second_ran.set_value(); });
  auto done = first_done.get_future();
  REQUIRE(ready_within(done));
  CHECK(done.get());
}

TEST_CASE("thread pool: a backlog of blocking tasks runs on every thread at once", "[rpc][pool]") {
  // Each task waits for all of them to have started: only a pool that puts every thread to work ends.
  for (const int threads : {2, 8}) {
    Gate started(threads);
    std::atomic<int> finished{0}, met{0};
    std::promise<void> all;
    ThreadPool pool(threads, "test pool");
    for (int i = 0; i < threads; ++i) {
      pool.submit([&] {
        if (started.arrive_and_wait()) ++met;
        if (finished.fetch_add(1) + 1 == threads) all.set_value();
      });
    }
    auto done = all.get_future();
    REQUIRE(ready_within(done));
    CHECK(met.load() == threads);
  }
}

TEST_CASE("thread pool: blocking tasks submitted one by one from a task each start", "[rpc][pool]") {
  // A chain: each task submits the next, then waits for the last one. The last one starts only once
  // every earlier task holds a thread, so the pool must keep adding workers behind blocked ones.
  constexpr int kThreads = 6;
  std::promise<void> last_ran;
  auto last = last_ran.get_future().share();
  std::atomic<int> finished{0}, released{0};
  std::promise<void> all;
  std::function<void(int)> step;
  ThreadPool pool(kThreads, "test pool");
  step = [&](int i) {
    if (i + 1 < kThreads) {
      pool.submit([&, i] { step(i + 1); });
      if (last.wait_for(kLimit) == std::future_status::ready) ++released;
    } else {
      last_ran.set_value();
    }
    if (finished.fetch_add(1) + 1 == kThreads) all.set_value();
  };
  pool.submit([&] { step(0); });
  auto done = all.get_future();
  REQUIRE(ready_within(done));
  CHECK(released.load() == kThreads - 1);
}

TEST_CASE("thread pool: a task that throws costs no worker", "[rpc][pool]") {
  std::promise<void> after;
  ThreadPool pool(1, "test pool");
  pool.submit([] { throw std::runtime_error("task failure on purpose"); });
  pool.submit([&] { after.set_value(); });
  auto done = after.get_future();
  REQUIRE(ready_within(done));
}

TEST_CASE("thread pool: stop() finishes the running task, drops the queue and joins", "[rpc][pool]") {
  std::promise<void> entered;
  std::promise<void> release;
  auto released = release.get_future().share();
  std::atomic<int> later{0};
  ThreadPool pool(1, "test pool");
  pool.submit([&, released] {
    entered.set_value();
    released.wait();
  });
  entered.get_future().wait();
  for (int i = 0; i < 10; ++i) pool.submit([&] { ++later; });
  CHECK(pool.busy() == 11);
  std::thread stopper([&] { pool.stop(); });
  std::this_thread::sleep_for(20ms);
  release.set_value();
  stopper.join();
  CHECK(later.load() == 0);
  CHECK(pool.busy() == 0);
  pool.submit([&] { ++later; });  // after stop: dropped, not run
  pool.stop();                    // idempotent
  CHECK(later.load() == 0);
}
