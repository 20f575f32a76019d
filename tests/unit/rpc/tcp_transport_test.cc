// The TCP transport between transports in one process: delivery, order, concurrency, racing connects,
// large tensors, peer failures and shutdown.
#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <map>

#include "base/error.h"
#include "tcp_test_harness.h"
#include "tensor/compare.h"

using namespace braid;
using namespace braid::rpc;
using namespace braid::rpc::test;

namespace {

size_t count_entries(const char* dir) {
  size_t n = 0;
  if (DIR* d = ::opendir(dir)) {
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    ::closedir(d);
  }
  return n;
}

// A port nothing listens on: bound once, then released.
std::vector<uint8_t> closed_port_address() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  const std::string text = "127.0.0.1:" + std::to_string(a.local_endpoint().port());
  a.close();
  return {text.begin(), text.end()};
}

}  // namespace

TEST_CASE("tcp transport: messages with tensors and meta travel both ways", "[rpc][tcp]") {
  Node a(0), b(1);
  introduce({&a, &b});
  const std::vector<uint8_t> address = a.transport().local_address();
  const std::string addr(address.begin(), address.end());
  CHECK(addr.rfind("127.0.0.1:", 0) == 0);
  CHECK(a.transport().describe_address(a.transport().local_address()) == addr);
  CHECK(a.transport().name() == "tcp");

  Message m = make_message(11, {arange(20, DType::Float32).view({4, 5}), full({3}, 7, DType::Int64)}, "hello b");
  m.requires_grad = {1, 0};
  a.send(1, m);
  REQUIRE(b.wait_messages(1));
  const Received got = b.messages()[0];
  CHECK(got.from == 0);
  CHECK(got.msg.type == MessageType::kCall);
  CHECK(got.msg.id == 11);
  CHECK(meta_text(got.msg) == "hello b");
  CHECK(got.msg.requires_grad == std::vector<uint8_t>{1, 0});
  REQUIRE(got.msg.tensors.size() == 2);
  CHECK(equal(got.msg.tensors[0], m.tensors[0]));
  CHECK(got.msg.tensors[0].dtype() == DType::Float32);
  CHECK(equal(got.msg.tensors[1], m.tensors[1]));
  // The receiver's tensors are its own memory.
  CHECK(got.msg.tensors[0].data_ptr() != m.tensors[0].data_ptr());

  b.send(0, make_message(12, {ones({2, 2}, DType::Float64)}, "reply", MessageType::kResult));
  REQUIRE(a.wait_messages(1));
  const Received back = a.messages()[0];
  CHECK(back.from == 1);
  CHECK(back.msg.type == MessageType::kResult);
  CHECK(meta_text(back.msg) == "reply");
  CHECK(equal(back.msg.tensors.at(0), ones({2, 2}, DType::Float64)));
  // One connection carries both directions.
  CHECK(a.tcp().connection_count() == 1);
  CHECK(b.tcp().connection_count() == 1);
  CHECK(a.failures().empty());
  CHECK(b.failures().empty());
}

TEST_CASE("tcp transport: 1000 messages from one sender arrive in send order", "[rpc][tcp]") {
  Node a(0), b(1);
  introduce({&a, &b});
  constexpr int kCount = 1000;
  for (int i = 0; i < kCount; ++i) {
    // Mixed sizes, so that some frames go out directly and others queue behind a partial write.
    const int64_t n = (i % 10 == 0) ? 100000 : (i % 3);
    a.send(1, make_message(static_cast<uint64_t>(i), {full({n}, i, DType::Int32)}, std::to_string(i)));
  }
  REQUIRE(b.wait_messages(kCount));
  const auto got = b.messages();
  REQUIRE(got.size() == kCount);
  for (int i = 0; i < kCount; ++i) {
    INFO("message " << i);
    REQUIRE(got[i].msg.id == static_cast<uint64_t>(i));
    REQUIRE(meta_text(got[i].msg) == std::to_string(i));
    const Tensor& t = got[i].msg.tensors.at(0);
    REQUIRE(t.numel() == ((i % 10 == 0) ? 100000 : (i % 3)));
    if (t.numel() > 0) REQUIRE(equal(t, full({t.numel()}, i, DType::Int32)));
  }
}

TEST_CASE("tcp transport: 8 threads sending concurrently deliver every message exactly once", "[rpc][tcp]") {
  Node a(0), b(1);
  introduce({&a, &b});
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t id = static_cast<uint64_t>(t) * 1000 + static_cast<uint64_t>(i);
        a.send(1, make_message(id, {full({i % 5 + 1}, t, DType::Float32)}));
      }
    });
  }
  go = true;
  for (auto& th : threads) th.join();
  REQUIRE(b.wait_messages(kThreads * kPerThread));
  const auto got = b.messages();
  CHECK(got.size() == kThreads * kPerThread);
  std::map<int, int> next;  // per thread, the next index expected (each thread's sends keep their order)
  for (const auto& r : got) {
    const int t = static_cast<int>(r.msg.id / 1000);
    const int i = static_cast<int>(r.msg.id % 1000);
    REQUIRE(i == next[t]);
    ++next[t];
    REQUIRE(equal(r.msg.tensors.at(0), full({i % 5 + 1}, t, DType::Float32)));
  }
  for (int t = 0; t < kThreads; ++t) CHECK(next[t] == kPerThread);
}

TEST_CASE("tcp transport: simultaneous first sends leave one connection and lose nothing", "[rpc][tcp]") {
  constexpr int kRounds = 10;
  constexpr int kCount = 50;
  for (int round = 0; round < kRounds; ++round) {
    INFO("round " << round);
    Node a(0), b(1);
    introduce({&a, &b});
    std::atomic<int> ready{0};
    auto sender = [&](Node& from, int to) {
      ++ready;
      while (ready.load() < 2) {
      }
      for (int i = 0; i < kCount; ++i) from.send(to, make_message(static_cast<uint64_t>(i)));
    };
    std::thread ta(sender, std::ref(a), 1);
    std::thread tb(sender, std::ref(b), 0);
    ta.join();
    tb.join();
    REQUIRE(a.wait_messages(kCount));
    REQUIRE(b.wait_messages(kCount));
    for (Node* n : {&a, &b}) {
      const auto got = n->messages();
      REQUIRE(got.size() == kCount);
      for (int i = 0; i < kCount; ++i) REQUIRE(got[i].msg.id == static_cast<uint64_t>(i));
    }
    // The survivor carries later traffic both ways.
    a.send(1, make_message(1000));
    b.send(0, make_message(1000));
    REQUIRE(a.wait_messages(kCount + 1));
    REQUIRE(b.wait_messages(kCount + 1));
    // The losing connections are closed on both ends (a retry that was already on its way may still be
    // accepted and declined a moment later); exactly one remains, and nobody saw a failure.
    CHECK(eventually([&] { return a.tcp().connection_count() == 1 && b.tcp().connection_count() == 1; }));
    CHECK(a.failures().empty());
    CHECK(b.failures().empty());
  }
}

TEST_CASE("tcp transport: a 64 MiB tensor arrives intact", "[rpc][tcp]") {
  Node a(0), b(1);
  introduce({&a, &b});
  const Tensor big = arange(16 << 20, DType::Int32);  // 64 MiB, every element distinct
  REQUIRE(big.nbytes() == size_t{64} << 20);
  a.send(1, make_message(1, {big, arange(3, DType::Int64)}, "big"));
  REQUIRE(b.wait_messages(1, 8000ms));
  const Received got = b.messages()[0];
  REQUIRE(got.msg.tensors.size() == 2);
  CHECK(got.msg.tensors[0].shape() == big.shape());
  CHECK(equal(got.msg.tensors[0], big));
  CHECK(equal(got.msg.tensors[1], arange(3, DType::Int64)));
  CHECK(meta_text(got.msg) == "big");
}

TEST_CASE("tcp transport: three transports, a message to self, and argument errors", "[rpc][tcp]") {
  Node a(0), b(1), c(2);
  introduce({&a, &b, &c});
  for (Node* from : {&a, &b, &c}) {
    for (Node* to : {&a, &b, &c}) from->send(to->id(), make_message(static_cast<uint64_t>(from->id())));
  }
  for (Node* n : {&a, &b, &c}) {
    REQUIRE(n->wait_messages(3));
    std::vector<int> senders;
    for (const auto& r : n->messages()) {
      CHECK(r.msg.id == static_cast<uint64_t>(r.from));
      senders.push_back(r.from);
    }
    std::sort(senders.begin(), senders.end());
    CHECK(senders == std::vector<int>{0, 1, 2});
  }
  // To self: delivered with copies of the tensors.
  const Tensor t = full({4}, 3.0);
  a.send(0, make_message(99, {t}));
  REQUIRE(a.wait_messages(4));
  const Received self = a.messages()[3];
  CHECK(self.from == 0);
  CHECK(equal(self.msg.tensors.at(0), t));
  CHECK(self.msg.tensors.at(0).data_ptr() != t.data_ptr());

  CHECK_THROWS_WITH(a.send(42, make_message(1)), Catch::Contains("worker 42: not a known peer"));
  CHECK_THROWS_AS(a.send(42, make_message(1)), InvalidArgument);
  Message bad = make_message(2, {arange(6, DType::Float32).view({2, 3}).transpose(0, 1)});
  CHECK_THROWS_AS(a.send(1, bad), WireError);
  CHECK_THROWS_AS(a.transport().add_peers({PeerInfo{5, "x", {'n', 'o', 'p', 'e'}}}), InvalidArgument);

  auto idle = make_tcp_transport({});
  CHECK_THROWS_WITH(idle->send(1, make_message(1)), Catch::Contains("before start()"));
  idle->shutdown();
  idle->shutdown();  // idempotent
  CHECK_THROWS_AS(idle->start(0, {}), CommError);

  a.transport().shutdown();
  CHECK_THROWS_WITH(a.send(1, make_message(1)), Catch::Contains("after shutdown()"));
  a.transport().shutdown();
}

TEST_CASE("tcp transport: a peer that shuts down is reported once, and a new one is reached", "[rpc][tcp]") {
  Node a(0);
  auto b = std::make_unique<Node>(1);
  introduce({&a, b.get()});
  a.send(1, make_message(1));
  REQUIRE(b->wait_messages(1));
  b->transport().shutdown();
  REQUIRE(a.wait_failures(1));
  std::this_thread::sleep_for(100ms);
  const auto failures = a.failures();
  REQUIRE(failures.size() == 1);
  CHECK(failures[0].first == 1);
  CHECK_THAT(failures[0].second, Catch::Contains("connection to worker 1 'node1'"));
  CHECK_THAT(failures[0].second, Catch::Contains("closed"));
  CHECK(b->failures().empty());  // the side that shut down reports nothing
  b.reset();

  // The worker comes back elsewhere: a later send connects to the new address.
  Node b2(1);
  introduce({&a, &b2});
  a.send(1, make_message(2));
  REQUIRE(b2.wait_messages(1));
  CHECK(b2.messages()[0].msg.id == 2);
  CHECK(a.failures().size() == 1);
}

TEST_CASE("tcp transport: an unreachable peer is reported after the bounded retries", "[rpc][tcp]") {
  TransportOptions options;
  options.connect_retries = 3;
  options.connect_backoff = std::chrono::milliseconds(5);
  options.connect_backoff_max = std::chrono::milliseconds(20);
  Node a(0, options);
  a.transport().add_peers({PeerInfo{5, "ghost", closed_port_address()}});
  const auto t0 = std::chrono::steady_clock::now();
  a.send(5, make_message(1));
  a.send(5, make_message(2));
  REQUIRE(a.wait_failures(1, 3000ms));
  CHECK(std::chrono::steady_clock::now() - t0 < 2000ms);
  auto failures = a.failures();
  CHECK(failures[0].first == 5);
  CHECK_THAT(failures[0].second, Catch::Contains("cannot reach worker 5 'ghost'"));
  CHECK_THAT(failures[0].second, Catch::Contains("after 3 connection attempts (2 queued message(s) dropped)"));
  CHECK_THAT(failures[0].second, Catch::Contains("refused"));
  // A later send tries again (and fails again, once).
  a.send(5, make_message(3));
  REQUIRE(a.wait_failures(2, 3000ms));
  std::this_thread::sleep_for(100ms);
  CHECK(a.failures().size() == 2);
  CHECK(a.tcp().connection_count() == 0);
}

TEST_CASE("tcp transport: shutdown leaves no thread and no socket behind", "[rpc][tcp]") {
  const size_t threads_before = count_entries("/proc/self/task");
  const size_t fds_before = count_entries("/proc/self/fd");
  {
    TransportOptions options;
    options.io_threads = 2;
    Node a(0, options), b(1, options), c(2);
    introduce({&a, &b, &c});
    for (int i = 0; i < 20; ++i) {
      a.send(1, make_message(static_cast<uint64_t>(i), {ones({100})}));
      b.send(2, make_message(static_cast<uint64_t>(i)));
      c.send(0, make_message(static_cast<uint64_t>(i)));
    }
    REQUIRE(b.wait_messages(20));
    REQUIRE(c.wait_messages(20));
    REQUIRE(a.wait_messages(20));
    CHECK(count_entries("/proc/self/task") == threads_before + 5);
    // Shut down with messages still queued behind a big one: they are dropped, nothing hangs.
    a.send(1, make_message(100, {ones({4 << 20})}));
    a.transport().shutdown();
    b.transport().shutdown();
    c.transport().shutdown();
    CHECK(count_entries("/proc/self/task") == threads_before);
    // a shut down first: it reports nothing (b and c may report a, which closed on them).
    CHECK(a.failures().empty());
  }
  CHECK(count_entries("/proc/self/task") == threads_before);
  CHECK(count_entries("/proc/self/fd") == fds_before);
}
