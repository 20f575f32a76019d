// The UCX transport between transports in one process: delivery, order (eager and rendezvous mixed),
// concurrency, large tensors and metas, messages to self, peer failures and shutdown. Compiles to
// nothing without UCX.
#include "base/config.h"

#if BRAID_HAVE_UCX

#include <algorithm>
#include <atomic>
#include <map>

#include "base/error.h"
#include "rpc/ucx/ucx_transport_impl.h"
#include "tensor/compare.h"
#include "ucx_test_harness.h"

using namespace braid;
using namespace braid::rpc;
using namespace braid::rpc::ucx_test;

TEST_CASE("ucx transport: messages with tensors and meta travel both ways", "[rpc][ucx]") {
  Node a(0), b(1);
  introduce({&a, &b});
  CHECK(a.transport().name() == "ucx");
  const auto address = a.transport().local_address();
  CHECK(address.size() > 16);
  CHECK(a.transport().describe_address(address) == "ucx worker address (" + std::to_string(address.size()) +
                                                       " bytes)");

  Message m = make_message(11, {arange(20, DType::Float32).view({4, 5}), full({3}, 7, DType::Int64),
                                empty({0, 3}, DType::Float32), scalar_tensor(2.5, DType::Float64)},
                           "hello b");
  m.requires_grad = {1, 0, 0, 1};
  a.send(1, m);
  REQUIRE(b.wait_messages(1));
  const Received got = b.messages()[0];
  CHECK(got.from == 0);
  CHECK(got.msg.type == MessageType::kCall);
  CHECK(got.msg.id == 11);
  CHECK(meta_of(got.msg) == "hello b");
  CHECK(got.msg.requires_grad == std::vector<uint8_t>{1, 0, 0, 1});
  REQUIRE(got.msg.tensors.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    INFO("tensor " << i);
    CHECK(got.msg.tensors[i].dtype() == m.tensors[i].dtype());
    CHECK(got.msg.tensors[i].shape() == m.tensors[i].shape());
    CHECK(equal(got.msg.tensors[i], m.tensors[i]));
  }
  CHECK(got.msg.tensors[0].data_ptr() != m.tensors[0].data_ptr());  // the receiver's own memory

  // Several tensors above the rendezvous threshold: fetched into their storage through one IOV.
  b.send(0, make_message(12, {full({300000}, 3, DType::Float32), ones({2, 2}, DType::Float64),
                              arange(100000, DType::Int64)},
                         "reply", MessageType::kResult));
  REQUIRE(a.wait_messages(1));
  const Received back = a.messages()[0];
  CHECK(back.from == 1);
  CHECK(back.msg.type == MessageType::kResult);
  CHECK(meta_of(back.msg) == "reply");
  REQUIRE(back.msg.tensors.size() == 3);
  CHECK(equal(back.msg.tensors[0], full({300000}, 3, DType::Float32)));
  CHECK(equal(back.msg.tensors[1], ones({2, 2}, DType::Float64)));
  CHECK(equal(back.msg.tensors[2], arange(100000, DType::Int64)));
  CHECK(a.failures().empty());
  CHECK(b.failures().empty());
}

TEST_CASE("ucx transport: a meta too large for the AM header travels in the data", "[rpc][ucx]") {
  Node a(0), b(1);
  introduce({&a, &b});
  std::string big_meta(20000, 'x');
  for (size_t i = 0; i < big_meta.size(); i += 97) big_meta[i] = static_cast<char>('a' + i % 26);
  // Eager (meta alone), and rendezvous into a staging buffer (meta + 4 MiB of tensors).
  a.send(1, make_message(1, {}, big_meta));
  a.send(1, make_message(2, {arange(1 << 20, DType::Int32), full({7}, 1, DType::Int8)}, big_meta));
  a.send(1, make_message(3, {ones({4})}, "small again"));
  REQUIRE(b.wait_messages(3));
  const auto got = b.messages();
  CHECK(got[0].msg.id == 1);
  CHECK(meta_of(got[0].msg) == big_meta);
  CHECK(got[1].msg.id == 2);
  CHECK(meta_of(got[1].msg) == big_meta);
  REQUIRE(got[1].msg.tensors.size() == 2);
  CHECK(equal(got[1].msg.tensors[0], arange(1 << 20, DType::Int32)));
  CHECK(equal(got[1].msg.tensors[1], full({7}, 1, DType::Int8)));
  CHECK(got[2].msg.id == 3);
  CHECK(meta_of(got[2].msg) == "small again");
  CHECK(b.failures().empty());
}

TEST_CASE("ucx transport: 1000 messages mixing eager and 1 MiB rendezvous arrive in send order", "[rpc][ucx]") {
  Node a(0), b(1);
  introduce({&a, &b});
  constexpr int kCount = 1000;
  auto size_of = [](int i) -> int64_t { return (i % 10 == 0) ? (1 << 18) + 1 : (i % 3); };  // int32: 1 MiB + 4
  for (int i = 0; i < kCount; ++i) {
    a.send(1, make_message(static_cast<uint64_t>(i), {full({size_of(i)}, i, DType::Int32)}, std::to_string(i)));
  }
  REQUIRE(b.wait_messages(kCount, 8000ms));
  const auto got = b.messages();
  REQUIRE(got.size() == kCount);
  for (int i = 0; i < kCount; ++i) {
    INFO("message " << i);
    REQUIRE(got[i].msg.id == static_cast<uint64_t>(i));
    REQUIRE(meta_of(got[i].msg) == std::to_string(i));
    const Tensor& t = got[i].msg.tensors.at(0);
    REQUIRE(t.numel() == size_of(i));
    if (t.numel() > 0) REQUIRE(equal(t, full({t.numel()}, i, DType::Int32)));
  }
}

TEST_CASE("ucx transport: 8 threads sending concurrently deliver every message exactly once", "[rpc][ucx]") {
  Node a(0), b(1), c(2);
  introduce({&a, &b, &c});
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      Node& from = (t % 2 == 0) ? a : c;  // two senders into one receiver
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t id = static_cast<uint64_t>(t) * 1000 + static_cast<uint64_t>(i);
        const int64_t n = (i % 50 == 0) ? 100000 : i % 5 + 1;
        from.send(1, make_message(id, {full({n}, t, DType::Float32)}));
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
    REQUIRE(r.from == ((t % 2 == 0) ? 0 : 2));
    REQUIRE(i == next[t]);
    ++next[t];
    const int64_t n = (i % 50 == 0) ? 100000 : i % 5 + 1;
    REQUIRE(equal(r.msg.tensors.at(0), full({n}, t, DType::Float32)));
  }
  for (int t = 0; t < kThreads; ++t) CHECK(next[t] == kPerThread);
}

TEST_CASE("ucx transport: a 64 MiB tensor arrives intact", "[rpc][ucx]") {
  Node a(0), b(1);
  introduce({&a, &b});
  const Tensor big = arange(int64_t{16} << 20, DType::Int32);  // 64 MiB
  a.send(1, make_message(5, {big}, "big"));
  REQUIRE(b.wait_messages(1, 8000ms));
  const auto got = b.messages();
  REQUIRE(got[0].msg.tensors.size() == 1);
  CHECK(got[0].msg.tensors[0].nbytes() == size_t{64} << 20);
  CHECK(equal(got[0].msg.tensors[0], big));
}

TEST_CASE("ucx transport: more large messages at once than the fetch budget all arrive, in order", "[rpc][ucx]") {
  // A receiver that fetches at most 4 MiB at once: of 20 messages of 1 MiB sent back to back, most wait.
  Node a(0), b(1, std::make_unique<ucx_detail::UcxTransport>(TransportOptions{}, size_t{4} << 20));
  introduce({&a, &b});
  const Tensor big = arange(int64_t{1} << 18, DType::Int32);
  constexpr int kCount = 20;
  for (int i = 0; i < kCount; ++i) {
    // Every other one with its prefix in the data (a meta over the AM header limit): fetched into staging.
    a.send(1, make_message(static_cast<uint64_t>(i), {big}, i % 2 == 0 ? std::string(10000, 'm') : ""));
    a.send(1, make_message(1000 + static_cast<uint64_t>(i), {}, "small"));  // eager, held back behind it
  }
  REQUIRE(b.wait_messages(2 * kCount));
  const auto got = b.messages();
  for (int i = 0; i < kCount; ++i) {
    INFO("message " << i);
    REQUIRE(got[2 * i].msg.id == static_cast<uint64_t>(i));
    REQUIRE(got[2 * i + 1].msg.id == 1000 + static_cast<uint64_t>(i));
    CHECK(meta_of(got[2 * i].msg).size() == (i % 2 == 0 ? 10000u : 0u));
    CHECK(equal(got[2 * i].msg.tensors.at(0), big));
  }
}

TEST_CASE("ucx transport: a message to self, and argument errors", "[rpc][ucx]") {
  Node a(0), b(1), c(2);
  introduce({&a, &b, &c});
  Tensor t = arange(10, DType::Float32);
  a.send(0, make_message(1, {t}, "to me"));
  REQUIRE(a.wait_messages(1));
  const auto mine = a.messages()[0];
  CHECK(mine.from == 0);
  CHECK(meta_of(mine.msg) == "to me");
  CHECK(equal(mine.msg.tensors.at(0), t));
  CHECK(mine.msg.tensors[0].data_ptr() != t.data_ptr());
  CHECK(mine.msg.requires_grad == std::vector<uint8_t>{0});

  CHECK_THROWS_AS(a.send(7, make_message(2)), InvalidArgument);
  CHECK_THROWS_WITH(a.send(7, make_message(2)), Catch::Contains("not a known peer") && Catch::Contains("[1, 2]"));
  CHECK_THROWS_AS(a.send(1, make_message(3, {arange(6, DType::Float32).view({2, 3}).transpose(0, 1)})), WireError);
  CHECK_THROWS_AS(a.transport().add_peers({PeerInfo{4, "empty", {}}}), InvalidArgument);

  auto idle = make_ucx_transport({});
  CHECK_THROWS_AS(idle->send(0, make_message(4)), CommError);  // before start()
  idle->shutdown();
  idle->shutdown();  // idempotent
  CHECK_THROWS_AS(idle->start(3, {}), CommError);

  // Every pair talks; a third transport does not disturb the other two.
  c.send(1, make_message(5, {}, "c to b"));
  b.send(2, make_message(6, {}, "b to c"));
  REQUIRE(b.wait_messages(1));
  REQUIRE(c.wait_messages(1));
  CHECK(meta_of(b.messages()[0].msg) == "c to b");
  CHECK(meta_of(c.messages()[0].msg) == "b to c");
  a.transport().shutdown();
  CHECK_THROWS_AS(a.send(1, make_message(7)), CommError);  // after shutdown()
}

#endif  // BRAID_HAVE_UCX
