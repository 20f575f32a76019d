// The gloo engine's registered-buffer exchange (collectives/gloo/registered_exchange.h) and the watchdog
// that bounds its waits (deadline_watchdog.h). Two ranks live in one process here, each on its own
// thread, connected through an in-process store over loopback: enough to exchange real messages, and to
// leave one rank's wait with no peer that will ever end it.
#include <catch2/catch.hpp>

#include "base/config.h"

#if BRAID_HAVE_GLOO
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "collectives/gloo/deadline_watchdog.h"
#include "collectives/gloo/gloo_devices.h"
#include "collectives/gloo/gloo_store.h"
#include "collectives/gloo/registered_exchange.h"
#include "store/hash_store.h"

using braid::Clock;
using braid::Deadline;
using braid::Millis;
using braid::collectives::gloo::DeadlineWatchdog;
using braid::collectives::gloo::GlooStore;
using braid::collectives::gloo::RegisteredExchange;

namespace {

constexpr int kRanks = 2;

// Block q of rank r's input: bytes (r * 37 + q * 11 + i) mod 251.
std::vector<uint8_t> input_of(int rank, size_t block) {
  std::vector<uint8_t> input(block * kRanks);
  for (int q = 0; q < kRanks; ++q) {
    for (size_t i = 0; i < block; ++i) input[q * block + i] = static_cast<uint8_t>((rank * 37 + q * 11 + i) % 251);
  }
  return input;
}

// Both ranks use one device, which the test holds: gloo's loop must not be torn down by whichever rank's
// thread happens to drop the last context (gloo's Loop destructor races with a concurrent unregister).
RegisteredExchange::Connect connect_through(std::shared_ptr<braid::store::Store> store,
                                            std::shared_ptr<::gloo::transport::Device> device, int rank) {
  return [store, device, rank](const Deadline&) mutable {
    auto context = std::make_shared<::gloo::rendezvous::Context>(rank, kRanks);
    context->setTimeout(std::chrono::hours(100));
    GlooStore gloo_store(store, "exchange/", std::chrono::seconds(30));
    context->connectFullMesh(gloo_store, device);
    return std::shared_ptr<::gloo::Context>(context);
  };
}

}  // namespace

TEST_CASE("gloo registered exchange: blocks of every size arrive whole, through growth and both areas",
          "[gloo][registered]") {
  REQUIRE(RegisteredExchange::available());  // Debian's gloo exports what abort() needs
  auto store = std::make_shared<braid::store::HashStore>();
  const auto device = braid::collectives::gloo::tcp_devices({"lo"})[0];
  // Sizes grow (new buffers, new slots), repeat (the two areas alternate) and shrink (the buffers stay).
  const std::vector<size_t> blocks = {8, 8, 8, 1000, 4096, 4096, 65536, 65536, 65536, 16, 3000};
  std::barrier parted(kRanks);
  auto run_rank = [&](int rank) {
    RegisteredExchange exchange(connect_through(store, device, rank));
    std::vector<std::string> wrong;
    uint32_t tag = 1;
    for (size_t block : blocks) {
      const auto input = input_of(rank, block);
      exchange.exchange(input.data(), block, tag++, Deadline::after(Millis(30'000)));
      const int peer = 1 - rank;
      const auto theirs = input_of(peer, block);
      if (std::memcmp(exchange.copy_from(peer), theirs.data() + rank * block, block) != 0) {
        wrong.push_back("block of " + std::to_string(block) + " bytes on rank " + std::to_string(rank));
      }
    }
    // As the engine does before closing (through its store): the peer may not have read this rank's last
    // block yet, and gloo reports a closed connection before data that arrived.
    parted.arrive_and_wait();
    return wrong;
  };
  auto other = std::async(std::launch::async, run_rank, 1);
  const auto wrong0 = run_rank(0);
  const auto wrong1 = other.get();
  CHECK(wrong0.empty());
  CHECK(wrong1.empty());
}

TEST_CASE("gloo registered exchange: abort() ends a wait that no peer will end, and every later call",
          "[gloo][registered]") {
  REQUIRE(RegisteredExchange::available());  // Debian's gloo exports what abort() needs
  auto store = std::make_shared<braid::store::HashStore>();
  const auto device = braid::collectives::gloo::tcp_devices({"lo"})[0];
  RegisteredExchange exchange0(connect_through(store, device, 0));
  RegisteredExchange exchange1(connect_through(store, device, 1));
  const auto input0 = input_of(0, 64);
  const auto input1 = input_of(1, 64);
  // One exchange together: both connected, buffers made.
  auto first = std::async(std::launch::async, [&] { exchange1.exchange(input1.data(), 64, 1, Deadline::never()); });
  exchange0.exchange(input0.data(), 64, 1, Deadline::never());
  first.get();

  // Rank 1 stays away; rank 0's wait would last the pairs' 100 hours without the watchdog.
  DeadlineWatchdog watchdog({[&] { exchange0.abort(); }});
  const auto t0 = Clock::now();
  {
    DeadlineWatchdog::Armed armed(watchdog, 0, Deadline::after(Millis(300)));
    CHECK_THROWS_AS(exchange0.exchange(input0.data(), 64, 2, Deadline::never()), ::gloo::IoException);
  }
  const auto waited = std::chrono::duration_cast<Millis>(Clock::now() - t0);
  CHECK(waited >= Millis(250));
  CHECK(waited < Millis(10'000));
  CHECK_THROWS_WITH(exchange0.exchange(input0.data(), 64, 3, Deadline::never()),
                    Catch::Contains("deadline passed"));
}

TEST_CASE("gloo deadline watchdog: a lane's callback runs once its deadline passes, not once disarmed",
          "[gloo][watchdog]") {
  std::atomic<int> expired0{0};
  std::atomic<int> expired1{0};
  DeadlineWatchdog watchdog({[&] { ++expired0; }, [&] { ++expired1; }});
  const auto t0 = Clock::now();
  // A far deadline first: the thread sleeps until it, and the nearer one armed after must wake it.
  watchdog.arm(1, Deadline::after(Millis(60'000)));
  watchdog.arm(0, Deadline::after(Millis(100)));
  while (expired0.load() == 0 && Clock::now() - t0 < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(Millis(5));
  }
  CHECK(expired0.load() == 1);
  CHECK(Clock::now() - t0 >= Millis(100));
  watchdog.disarm(1);
  // Disarmed before its deadline: never called. Armed with no deadline: never armed.
  watchdog.arm(1, Deadline::after(Millis(50)));
  watchdog.disarm(1);
  watchdog.arm(0, Deadline::never());
  std::this_thread::sleep_for(Millis(200));
  CHECK(expired0.load() == 1);
  CHECK(expired1.load() == 0);
}

TEST_CASE("gloo deadline watchdog: destroyed while a callback runs, it still joins", "[gloo][watchdog]") {
  std::atomic<bool> in_callback{false};
  const auto t0 = Clock::now();
  {
    DeadlineWatchdog watchdog({[&] {
      in_callback = true;
      std::this_thread::sleep_for(Millis(200));
    }});
    watchdog.arm(0, Deadline::after(Millis(10)));
    while (!in_callback.load()) std::this_thread::sleep_for(Millis(1));
  }  // the stop comes while the callback runs, without the watchdog's lock
  CHECK(Clock::now() - t0 < std::chrono::seconds(10));
}

#endif  // BRAID_HAVE_GLOO
