// One suite run against every Store implementation: HashStore, PrefixStore, FileStore, TCPStore.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "base/deadline.h"
#include "base/error.h"
#include "store/file_store.h"
#include "store/hash_store.h"
#include "store/prefix_store.h"
#include "store/tcp_store.h"

using namespace braid;
using namespace braid::store;
using namespace std::chrono_literals;

namespace {

std::string temp_path(const std::string& tag) {
  static std::atomic<int> n{0};
  return (std::filesystem::temp_directory_path() /
          ("braid_store_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(n++)))
      .string();
}

// Makes a fresh store of each kind, named for the section.
std::vector<std::pair<std::string, std::function<std::shared_ptr<Store>()>>> store_kinds() {
  return {
      {"HashStore", [] { return std::make_shared<HashStore>(); }},
      {"PrefixStore", [] { return std::make_shared<PrefixStore>("p", std::make_shared<HashStore>()); }},
      {"FileStore", [] { return std::make_shared<FileStore>(temp_path("conf"), 1); }},
      {"TCPStore",
       [] {
         TcpStoreOptions o;
         o.is_master = true;
         o.world_size = 1;
         o.timeout = 10s;
         return std::make_shared<TCPStore>("127.0.0.1", 0, o);
       }},
  };
}

}  // namespace

TEST_CASE("store conformance: set/get/add/compare_set/check/delete/num_keys", "[store]") {
  for (auto& [name, make] : store_kinds()) {
    SECTION(name) {
      auto s = make();
      s->set("a", "1");
      REQUIRE(s->get_string("a") == "1");
      s->set("a", "2");
      REQUIRE(s->get_string("a") == "2");
      REQUIRE(s->add("counter", 5) == 5);
      REQUIRE(s->add("counter", -2) == 3);
      REQUIRE(s->get_string("counter") == "3");
      REQUIRE(s->check({"a", "counter"}));
      REQUIRE_FALSE(s->check({"a", "missing"}));

      // compare_set: absent key + empty expected sets; mismatch returns the current value.
      REQUIRE(to_string(s->compare_set("cas", {}, to_bytes("x"))) == "x");
      REQUIRE(to_string(s->compare_set("cas", to_bytes("nope"), to_bytes("y"))) == "x");
      REQUIRE(to_string(s->compare_set("cas", to_bytes("x"), to_bytes("y"))) == "y");
      REQUIRE(to_string(s->compare_set("absent", to_bytes("e"), to_bytes("d"))) == "e");
      REQUIRE_FALSE(s->check({"absent"}));

      const int64_t before = s->num_keys();
      REQUIRE(s->delete_key("a"));
      REQUIRE_FALSE(s->delete_key("a"));
      REQUIRE(s->num_keys() == before - 1);

      s->multi_set({"m1", "m2"}, {to_bytes("v1"), to_bytes("v2")});
      auto values = s->multi_get({"m1", "m2"});
      REQUIRE(values.size() == 2);
      REQUIRE(to_string(values[1]) == "v2");

      // Binary values survive unchanged.
      Bytes bin = {0, 1, 2, 255, 0};
      s->set("bin", bin);
      REQUIRE(s->get("bin") == bin);
    }
  }
}

TEST_CASE("store conformance: add on a non-counter value is a clear error", "[store]") {
  for (auto& [name, make] : store_kinds()) {
    SECTION(name) {
      auto s = make();
      s->set("text", "hello");
      REQUIRE_THROWS_WITH(s->add("text", 1), Catch::Contains("not an integer counter"));
    }
  }
}

TEST_CASE("store conformance: get waits for a key set later by another thread", "[store]") {
  for (auto& [name, make] : store_kinds()) {
    SECTION(name) {
      auto s = make();
      std::thread setter([&] {
        std::this_thread::sleep_for(50ms);
        s->set("late", "here");
      });
      REQUIRE(to_string(s->get("late", 5000ms)) == "here");
      setter.join();
    }
  }
}

TEST_CASE("store conformance: a timed-out wait names the missing keys and returns on time", "[store]") {
  for (auto& [name, make] : store_kinds()) {
    SECTION(name) {
      auto s = make();
      s->set("present", "1");
      const auto start = Clock::now();
      REQUIRE_THROWS_MATCHES(s->wait({"present", "absent"}, 300ms), braid::TimeoutError,
                             Catch::Matchers::Predicate<braid::TimeoutError>(
                                 [](const braid::TimeoutError& e) {
                                   const std::string m = e.what();
                                   return m.find("timed out") != std::string::npos &&
                                          m.find("(missing: [") != std::string::npos && m.find("absent])") != std::string::npos &&
                                          m.find("300 ms") != std::string::npos;
                                 },
                                 "message names the missing key and the timeout"));
      const double ms = elapsed_ms(start);
      REQUIRE(ms >= 250);
      REQUIRE(ms < 3000);
      REQUIRE_THROWS_AS(s->get("nonexistent key", 200ms), braid::TimeoutError);
      // The store stays usable after a timeout.
      s->set("after", "ok");
      REQUIRE(s->get_string("after") == "ok");
    }
  }
}

TEST_CASE("store conformance: concurrent adds from many threads are atomic", "[store]") {
  for (auto& [name, make] : store_kinds()) {
    SECTION(name) {
      auto s = make();
      constexpr int kThreads = 4, kAdds = 50;
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&] {
          for (int i = 0; i < kAdds; ++i) s->add("sum", 1);
        });
      }
      for (auto& t : threads) t.join();
      REQUIRE(s->get_string("sum") == std::to_string(kThreads * kAdds));
    }
  }
}

TEST_CASE("store conformance: many concurrent waiters all wake on one set", "[store]") {
  for (auto& [name, make] : store_kinds()) {
    SECTION(name) {
      auto s = make();
      std::atomic<int> woke{0};
      std::vector<std::thread> waiters;
      for (int t = 0; t < 6; ++t) {
        waiters.emplace_back([&] {
          s->wait({"go"}, 5000ms);
          ++woke;
        });
      }
      std::this_thread::sleep_for(50ms);
      // A blocked waiter must not hold up other calls on the same store object.
      s->set("unrelated", "1");
      REQUIRE(s->get_string("unrelated") == "1");
      s->set("go", "1");
      for (auto& t : waiters) t.join();
      REQUIRE(woke == 6);
    }
  }
}

// What an engine listening on its own picks its interface toward (security::interface_toward).
TEST_CASE("store server_host: the TCPStore's host, through prefixes; none for local stores", "[store]") {
  for (const auto& [kind, make] : store_kinds()) {
    SECTION(kind) {
      auto s = make();
      CHECK(s->server_host() == (kind == "TCPStore" ? "127.0.0.1" : ""));
      CHECK(PrefixStore("outer", s).server_host() == s->server_host());
    }
  }
}
