// Hidden benchmark ("[.bench]", not run by CTest): round-trip latency of small messages, throughput with
// 64 messages in flight, and 1 / 16 MiB tensor echo, between two TCP transports in this process; and, for
// reference under the same machine load, the same round trip and echo over plain blocking sockets.
//   build-*/tests/rpc_tests "[.bench]"              (or -c latency / -c window / -c echo / -c raw)
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <semaphore>

#include "tcp_test_harness.h"

using namespace braid;
using namespace braid::rpc;
using namespace braid::rpc::test;

namespace {

using Clock = std::chrono::steady_clock;

// The client side: wakes the waiting thread on each reply.
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t replies = 0;
  Message last;
  void on_reply(Message msg) {
    {
      std::lock_guard lock(mu);
      ++replies;
      last = std::move(msg);
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

// CPU seconds (user + system) of the whole process so far.
double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6; };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

void round_trips(const char* label, Node& client, Waiter& w, const std::function<Message()>& make, int iters) {
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iters));
  double cpu0 = 0;
  for (int i = 0; i < iters + 1000; ++i) {
    if (i == 1000) cpu0 = cpu_seconds();
    const uint64_t before = w.count();
    const auto t0 = Clock::now();
    client.send(1, make());
    REQUIRE(w.wait(before + 1));
    if (i >= 1000) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  const double cpu_us = (cpu_seconds() - cpu0) * 1e6 / iters;
  std::printf("tcp transport round trip, %s: p50 %.1f us, p99 %.1f us, %.1f us of CPU per round trip (%d "
              "iterations)\n", label, percentile(us, 0.5), percentile(us, 0.99), cpu_us, iters);
}

// Plain blocking sockets, one thread per side: what the kernel's loopback gives without any transport.
void raw_echo(size_t bytes, int iters) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  std::thread server([&] {
    asio::ip::tcp::socket s(io);
    acceptor.accept(s);
    s.set_option(asio::ip::tcp::no_delay(true));
    std::vector<uint8_t> buf(bytes);
    boost::system::error_code ec;
    // TransferAll: one system call per chunk the kernel takes, not Asio's default 64 KiB steps.
    while (asio::read(s, asio::buffer(buf), rpc::tcp_detail::TransferAll{}, ec) == bytes && !ec) {
      asio::write(s, asio::buffer(buf), rpc::tcp_detail::TransferAll{}, ec);
    }
  });
  asio::ip::tcp::socket c(io);
  c.connect(acceptor.local_endpoint());
  c.set_option(asio::ip::tcp::no_delay(true));
  std::vector<uint8_t> out(bytes, 1), in(bytes);
  std::vector<double> us;
  for (int i = 0; i < iters + iters / 10; ++i) {
    const auto t0 = Clock::now();
    asio::write(c, asio::buffer(out), rpc::tcp_detail::TransferAll{});
    asio::read(c, asio::buffer(in), rpc::tcp_detail::TransferAll{});
    if (i >= iters / 10) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  c.close();
  server.join();
  const double p50 = percentile(us, 0.5);
  std::printf("raw blocking sockets, %zu-byte echo: p50 %.1f us, p99 %.1f us = %.2f GB/s one way\n", bytes, p50,
              percentile(us, 0.99), static_cast<double>(bytes) / p50 / 1e3);
}

}  // namespace

TEST_CASE("tcp transport benchmark", "[.bench][rpc][tcp]") {
  Waiter w;
  std::counting_semaphore<1024> window(64);
  std::atomic<bool> windowed{false};
  Node client(0, {}, [&](Node&, int, Message msg) {
    if (windowed.load(std::memory_order_relaxed)) {
      window.release();
      return;
    }
    w.on_reply(std::move(msg));
  });
  Node server(1, {}, echo());
  introduce({&client, &server});

  SECTION("raw") {
    raw_echo(64, 20000);
    raw_echo(size_t{1} << 20, 200);
    raw_echo(size_t{16} << 20, 40);
  }

  SECTION("latency") {
    round_trips("empty message", client, w, [] { return make_message(1); }, 20000);
    const Tensor small = ones({16});  // 64 bytes
    round_trips("64-byte tensor", client, w, [&] { return make_message(1, {small}); }, 20000);
    const std::string meta(64, 'm');
    round_trips("64 bytes of meta", client, w, [&] { return make_message(1, {}, meta); }, 20000);
  }

  SECTION("window") {
    // 64 messages in flight: a slot frees when its reply arrives.
    windowed = true;
    constexpr int kCalls = 200000;
    const double cpu0 = cpu_seconds();
    const auto t0 = Clock::now();
    for (int i = 0; i < kCalls; ++i) {
      window.acquire();
      client.send(1, make_message(static_cast<uint64_t>(i), {}, "0123456789abcdef"));
    }
    for (int i = 0; i < 64; ++i) window.acquire();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const double cpu_us = (cpu_seconds() - cpu0) * 1e6 / kCalls;
    std::printf("tcp transport, 64 in flight: %.0f round trips/s (%d in %.2f s), %.1f us of CPU per round trip\n",
                kCalls / secs, kCalls, secs, cpu_us);
    for (int i = 0; i < 64; ++i) window.release();
    windowed = false;
  }

  SECTION("echo") for (const size_t mib : {size_t{1}, size_t{16}}) {
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
    std::printf("tcp transport, %zu MiB echo: median round trip %.2f ms = %.2f GB/s of payload one way "
                "(%.2f GB/s both ways)\n", mib, median * 1e3, static_cast<double>(big.nbytes()) / median / 1e9,
                2.0 * static_cast<double>(big.nbytes()) / median / 1e9);
  }
}
