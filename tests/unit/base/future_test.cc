#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "base/future.h"

using namespace braid;
using namespace std::chrono_literals;

TEST_CASE("Future: value set on another thread wakes the waiter", "[future]") {
  Future<int> f("test op");
  std::thread producer([f] {
    std::this_thread::sleep_for(20ms);
    f.set_value(42);
  });
  REQUIRE(f.value(5000ms) == 42);
  REQUIRE(f.completed());
  REQUIRE_FALSE(f.has_error());
  producer.join();
}

TEST_CASE("Future: errors are rethrown by value() and skip then()", "[future]") {
  Future<int> f;
  bool called = false;
  auto next = f.then([&](const int& v) {
    called = true;
    return v + 1;
  });
  f.set_error(std::make_exception_ptr(CommError("peer 3 died")));
  REQUIRE_THROWS_WITH(f.value(100ms), "peer 3 died");
  REQUIRE_THROWS_WITH(next.value(100ms), "peer 3 died");
  REQUIRE_FALSE(called);
}

TEST_CASE("Future: then() chains and an exception in the callback fails the next future", "[future]") {
  Future<int> f;
  auto doubled = f.then([](const int& v) { return v * 2; });
  auto text = doubled.then([](const int& v) { return std::to_string(v); });
  auto broken = f.then([](const int&) -> int { throw InvalidArgument("bad callback"); });
  f.set_value(21);
  REQUIRE(text.value(100ms) == "42");
  REQUIRE_THROWS_WITH(broken.value(100ms), "bad callback");
}

TEST_CASE("Future: callbacks run exactly once, in order, also when added after completion", "[future]") {
  Future<int> f;
  std::vector<int> order;
  f.add_callback([&](const Future<int>&) { order.push_back(1); });
  f.add_callback([&](const Future<int>&) { order.push_back(2); });
  f.set_value(0);
  f.add_callback([&](const Future<int>&) { order.push_back(3); });
  REQUIRE(order == std::vector<int>{1, 2, 3});
}

TEST_CASE("Future: a wait that runs out names the operation", "[future]") {
  Future<int> f("allreduce #7 on group world");
  REQUIRE_THROWS_AS(f.wait(30ms), TimeoutError);
  REQUIRE_THROWS_WITH(f.wait(30ms), Catch::Contains("allreduce #7 on group world") && Catch::Contains("30 ms"));
}

TEST_CASE("Future: completing twice is an internal error", "[future]") {
  Future<int> f;
  f.set_value(1);
  REQUIRE_THROWS_AS(f.set_value(2), InternalError);
}

TEST_CASE("Future: wait_all returns values in order and rethrows the first error", "[future]") {
  std::vector<Future<int>> fs(3);
  for (int i = 0; i < 3; ++i) fs[i].set_value(i * 10);
  REQUIRE(wait_all(fs, 100ms) == std::vector<int>{0, 10, 20});
  std::vector<Future<int>> bad(2);
  bad[0].set_value(1);
  bad[1].set_error(std::make_exception_ptr(TimeoutError("late")));
  REQUIRE_THROWS_WITH(wait_all(bad, 100ms), "late");
}

TEST_CASE("Future: many threads waiting and one completing", "[future]") {
  Future<int> f;
  std::atomic<int> seen{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 8; ++i) {
    waiters.emplace_back([&] { seen += f.value(5000ms); });
  }
  std::this_thread::sleep_for(10ms);
  f.set_value(1);
  for (auto& t : waiters) t.join();
  REQUIRE(seen == 8);
}
