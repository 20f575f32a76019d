// Hidden benchmark ("[.bench]", not run by CTest): round-trip latency of small messages, throughput with
// 64 messages in flight, and 1 / 16 MiB tensor echo, between two UCX transports in this process.
//   build-*/tests/rpc_tests "[.bench][ucx]"
#include "base/config.h"

#if BRAID_HAVE_UCX

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <semaphore>

#include "ucx_test_harness.h"

using namespace braid;
using namespace braid::rpc;
using namespace braid::rpc::ucx_test;

namespace {

using Clock = std::chrono::steady_clock;

// The client side: wakes the waiting thread on each reply.
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t replies = 0;
  void on_reply() {
    {
      std::lock_guard lock(mu);
      ++replies;
    }
    cv.notify_one();
  }
  uint64_t count() {
    std::lock_guard lock(mu);
    return replies;
  }
  bool wait(uint64_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return replies >= n; });
  }
};

Node::Handler echo() {
  return [](Node& self, int from, Message msg) {
    msg.type = MessageType::kResult;
    self.send(from, std::move(msg));
  };
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

void round_trips(const char* label, Node& client, Waiter& w, const std::function<Message()>& make, int iters) {
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters + 1000; ++i) {
    const uint64_t before = w.count();
    const auto t0 = Clock::now();
    client.send(1, make());
    REQUIRE(w.wait(before + 1));
    if (i >= 1000) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::printf("ucx transport round trip, %s: p50 %.1f us, p99 %.1f us (%d iterations)\n", label,
              percentile(us, 0.5), percentile(us, 0.99), iters);
}

}  // namespace

TEST_CASE("ucx transport benchmark", "[.bench][rpc][ucx]") {
  Waiter w;
  std::counting_semaphore<1024> window(64);
  std::atomic<bool> windowed{false};
  Node client(0, TransportOptions{}, [&](Node&, int, Message) {
    if (windowed.load(std::memory_order_relaxed)) {
      window.release();
      return;
    }
    w.on_reply();
  });
  Node server(1, TransportOptions{}, echo());
  introduce({&client, &server});

  round_trips("empty message", client, w, [] { return make_message(1); }, 20000);
  const Tensor small = ones({16});  // 64 bytes
  round_trips("64-byte tensor", client, w, [&] { return make_message(1, {small}); }, 20000);
  const std::string meta(64, 'm');
  round_trips("64 bytes of meta", client, w, [&] { return make_message(1, {}, meta); }, 20000);

  {
    // 64 messages in flight: a slot frees when its reply arrives.
    windowed = true;
    constexpr int kCalls = 200000;
    const auto t0 = Clock::now();
    for (int i = 0; i < kCalls; ++i) {
      window.acquire();
      client.send(1, make_message(static_cast<uint64_t>(i), {}, "0123456789abcdef"));
    }
    for (int i = 0; i < 64; ++i) window.acquire();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("ucx transport, 64 in flight: %.0f messages/s (%d round trips in %.2f s)\n", kCalls / secs, kCalls,
                secs);
    for (int i = 0; i < 64; ++i) window.release();
    windowed = false;
  }

  for (const size_t mib : {size_t{1}, size_t{16}}) {
    const Tensor big = ones({static_cast<int64_t>(mib << 18)});  // float32: mib MiB
    const int iters = mib == 1 ? 200 : 40;
    std::vector<double> secs;
    for (int i = 0; i < iters + 5; ++i) {
      const uint64_t before = w.count();
      const auto t0 = Clock::now();
      client.send(1, make_message(1, {big}));
      REQUIRE(w.wait(before + 1));
      if (i >= 5) secs.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    const double median = percentile(secs, 0.5);
    std::printf("ucx transport, %zu MiB echo: median round trip %.2f ms = %.2f GB/s of payload one way "
                "(%.2f GB/s both ways)\n", mib, median * 1e3, static_cast<double>(big.nbytes()) / median / 1e9,
                2.0 * static_cast<double>(big.nbytes()) / median / 1e9);
  }
}

#endif  // BRAID_HAVE_UCX
