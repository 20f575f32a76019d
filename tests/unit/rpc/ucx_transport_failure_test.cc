// The UCX transport when things go wrong: a peer that shuts down, shutdown with messages in flight, and
// malformed active messages injected by a raw UCX worker (ucx_raw_worker.h) that holds the job's secret.
// Compiles to nothing without UCX.
#include "base/config.h"

#if BRAID_HAVE_UCX

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <map>

#include "base/error.h"
#include "rpc/ucx/ucx_context.h"
#include "rpc/ucx/ucx_envelope.h"
#include "security/job_secret.h"
#include "tensor/compare.h"
#include "ucx_raw_worker.h"
#include "ucx_test_harness.h"

using namespace braid;
using namespace braid::rpc;
using namespace braid::rpc::ucx_test;
using Clock = std::chrono::steady_clock;

TEST_CASE("ucx transport: a peer that shuts down is reported once, with the UCX status", "[rpc][ucx]") {
  Node a(0);
  auto b = std::make_unique<Node>(1);
  introduce({&a, b.get()});
  a.send(1, make_message(1, {ones({8})}));
  REQUIRE(b->wait_messages(1));

  // What this container's UCX reports: the monitor endpoint (tcp) fails with "Endpoint timeout" within
  // milliseconds of the peer's worker going away, without any further send.
  const auto t0 = Clock::now();
  b->transport().shutdown();
  REQUIRE(a.wait_failures(1, 3000ms));
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto failures = a.failures();
  CHECK(failures[0].first == 1);
  CHECK_THAT(failures[0].second, Catch::Contains("worker 1 (node1)") && Catch::Contains("UCX status"));
  CHECK(seconds < 2.0);
  std::this_thread::sleep_for(200ms);
  CHECK(a.failures().size() == 1);  // once
  CHECK(b->failures().empty());     // a transport does not report the endpoints it closes itself

  // A later send connects again; the peer is still gone, which is reported again (bounded, no hang).
  a.send(1, make_message(2, {ones({1 << 20})}));
  REQUIRE(a.wait_failures(2, 3000ms));
  CHECK(a.failures()[1].first == 1);
  b.reset();
}

TEST_CASE("ucx transport: sends pending towards a peer that goes away fail it, and others still work",
          "[rpc][ucx]") {
  Node a(0), c(2);
  auto b = std::make_unique<Node>(1);
  introduce({&a, b.get(), &c});
  a.send(1, make_message(0));
  REQUIRE(b->wait_messages(1));
  // Rendezvous sends in flight while the receiver shuts down.
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    for (uint64_t i = 1; !stop.load(); ++i) {
      a.send(1, make_message(i, {ones({1 << 18})}));
      std::this_thread::sleep_for(100us);
    }
  });
  std::this_thread::sleep_for(20ms);
  b->transport().shutdown();
  const bool reported = a.wait_failures(1, 3000ms);
  stop = true;
  sender.join();
  REQUIRE(reported);
  CHECK(a.failures()[0].first == 1);
  a.send(2, make_message(99, {ones({1 << 18})}, "still here"));
  REQUIRE(c.wait_messages(1));
  CHECK(meta_of(c.messages()[0].msg) == "still here");
  b.reset();
}

TEST_CASE("ucx transport: shutdown with messages in flight is clean and bounded", "[rpc][ucx]") {
  Node b(1);
  const Tensor big = ones({1 << 20});  // 4 MiB: rendezvous
  const Tensor small = ones({16});
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    auto a = std::make_unique<Node>(0);
    introduce({a.get(), &b});
    for (int i = 0; i < 100; ++i) {
      a->send(1, make_message(static_cast<uint64_t>(i), {(i % 4 == 0) ? big : small}, std::to_string(round)));
    }
    const auto t0 = Clock::now();
    a->transport().shutdown();  // some are queued, some in UCX, some delivered
    CHECK(std::chrono::duration<double>(Clock::now() - t0).count() < 1.5);
    CHECK(a->failures().empty());
    CHECK_THROWS_AS(a->send(1, make_message(1000)), CommError);
    a.reset();
  }
  // Whatever b got came whole, and each round's messages in order from the first on.
  std::this_thread::sleep_for(50ms);
  std::map<std::string, uint64_t> next;
  for (const auto& r : b.messages()) {
    const std::string round = meta_of(r.msg);
    REQUIRE(r.msg.id == next[round]);
    ++next[round];
    CHECK(r.msg.tensors.at(0).numel() == ((r.msg.id % 4 == 0) ? (1 << 20) : 16));
  }
  // b connected back to each a it heard from, and noticed it leave: at most once per round.
  CHECK(b.failures().size() <= 3);
  for (const auto& f : b.failures()) CHECK(f.first == 0);
}

TEST_CASE("ucx transport: a frame over the receiver's limits fails both sides, and the sender reconnects",
          "[rpc][ucx]") {
  TransportOptions strict;
  strict.limits.max_meta_bytes = 100;
  Node a(0), b(1, strict);
  introduce({&a, &b});
  a.send(1, make_message(1, {}, "fine"));
  a.send(1, make_message(2, {}, std::string(200, 'm')));  // b rejects this one and the rest of the stream
  a.send(1, make_message(3, {}, "lost with the stream"));
  REQUIRE(b.wait_failures(1));
  CHECK(b.failures()[0].first == 0);
  CHECK_THAT(b.failures()[0].second, Catch::Contains("meta of 200 bytes exceeds the limit of 100 bytes"));
  // b's reset reaches a, which reports b and makes a new connection for its next send.
  REQUIRE(a.wait_failures(1));
  CHECK(a.failures()[0].first == 1);
  CHECK_THAT(a.failures()[0].second, Catch::Contains("worker 1 (node1) dropped the messages of this worker") &&
                                         Catch::Contains("exceeds the limit"));
  a.send(1, make_message(4, {ones({1 << 18})}, "after the reset"));
  REQUIRE(b.wait_messages(2));
  const auto got = b.messages();
  CHECK(meta_of(got[0].msg) == "fine");
  CHECK(meta_of(got[1].msg) == "after the reset");
  CHECK(equal(got[1].msg.tensors.at(0), ones({1 << 18})));
  std::this_thread::sleep_for(100ms);
  CHECK(a.failures().size() == 1);  // the new connection is healthy
  CHECK(b.failures().size() == 1);
}

TEST_CASE("ucx transport: malformed active messages are dropped, reported and answered with a reset",
          "[rpc][ucx]") {
  TransportOptions options;
  options.limits.max_payload_bytes = 1 << 20;
  Node b(1, options), a(0);
  introduce({&a, &b});
  RawWorker mallory;
  b.transport().add_peers({PeerInfo{5, "mallory", mallory.address()}});
  mallory.connect(b.transport().local_address());
  // This raw peer holds the job's secret (it is in this process): it authenticates, then misbehaves.
  const Signer sign{security::job_secret(), 1, b.transport().local_address(), mallory.nonce()};

  // A valid frame first: the raw worker speaks the format.
  const Message hello = make_message(1, {full({4}, 2, DType::Int32)}, "hi");
  std::vector<uint8_t> payload(16);
  const int32_t twos[4] = {2, 2, 2, 2};
  std::memcpy(payload.data(), twos, 16);
  mallory.send(ucx_detail::kFrameAmId, header_for(5, 77, 0, &hello, &sign), payload);
  REQUIRE(mallory.progress_until([&] { return b.messages().size() >= 1; }));
  CHECK(b.messages()[0].from == 5);
  CHECK(equal(b.messages()[0].msg.tensors.at(0), full({4}, 2, DType::Int32)));

  SECTION("an envelope without the magic has no sender to blame: dropped, nothing reported") {
    std::vector<uint8_t> junk(40, 0xab);
    mallory.send(ucx_detail::kFrameAmId, junk, {});
    mallory.progress_until([] { return true; }, 100ms);
    CHECK(b.failures().empty());
    CHECK(b.messages().size() == 1);
  }
  SECTION("a payload over the limit") {
    const Message huge = make_message(2, {ones({1 << 19})});  // 2 MiB > 1 MiB
    mallory.send(ucx_detail::kFrameAmId, header_for(5, 77, 1, &huge), std::vector<uint8_t>(16));
    REQUIRE(mallory.progress_until([&] { return b.failures().size() >= 1; }));
    CHECK(b.failures()[0].first == 5);
    CHECK_THAT(b.failures()[0].second, Catch::Contains("mallory") && Catch::Contains("exceeds the limit"));
    REQUIRE(mallory.wait_resets(1));
    CHECK_THAT(mallory.resets()[0], Catch::Contains("exceeds the limit"));
    // The rest of that stream is dropped.
    mallory.send(ucx_detail::kFrameAmId, header_for(5, 77, 2, &hello), payload);
    mallory.progress_until([] { return true; }, 100ms);
    CHECK(b.messages().size() == 1);
    // A new stream (what a real sender makes after the reset) is accepted.
    mallory.send(ucx_detail::kFrameAmId, header_for(5, 78, 0, &hello, &sign), payload);
    REQUIRE(mallory.progress_until([&] { return b.messages().size() >= 2; }));
  }
  SECTION("a frame header with a bad magic") {
    std::vector<uint8_t> header = header_for(5, 77, 1, &hello);
    header[ucx_detail::kEnvelopeBytes] ^= 0xff;
    mallory.send(ucx_detail::kFrameAmId, header, payload);
    REQUIRE(mallory.progress_until([&] { return b.failures().size() >= 1; }));
    CHECK_THAT(b.failures()[0].second, Catch::Contains("bad magic"));
  }
  SECTION("data that does not match the frame header") {
    mallory.send(ucx_detail::kFrameAmId, header_for(5, 77, 1, &hello), std::vector<uint8_t>(15));
    REQUIRE(mallory.progress_until([&] { return b.failures().size() >= 1; }));
    CHECK_THAT(b.failures()[0].second, Catch::Contains("15 bytes of tensor data"));
  }
  SECTION("a sequence number seen before") {
    mallory.send(ucx_detail::kFrameAmId, header_for(5, 77, 0, &hello, &sign), payload);
    REQUIRE(mallory.progress_until([&] { return b.failures().size() >= 1; }));
    CHECK_THAT(b.failures()[0].second, Catch::Contains("arrived twice"));
  }
  // Whatever happened, the other peers are unaffected.
  const size_t before = b.messages().size();
  a.send(1, make_message(9, {}, "from a"));
  REQUIRE(mallory.progress_until([&] { return b.messages().size() >= before + 1; }));
  CHECK(meta_of(b.messages().back().msg) == "from a");
  CHECK(b.messages().back().from == 0);
  for (const auto& f : b.failures()) CHECK(f.first == 5);
}

TEST_CASE("ucx transport: a reset from the receiver fails the connection, and the next send reconnects",
          "[rpc][ucx]") {
  Node a(0);
  RawWorker mallory;  // plays a receiver that rejected a's stream
  a.transport().add_peers({PeerInfo{5, "mallory", mallory.address()}});
  a.send(5, make_message(1));
  REQUIRE(mallory.wait_frames(1));
  const ucx_detail::Envelope first = mallory.frames()[0];
  CHECK(first.sender == 0);
  CHECK(first.seq == 0);
  mallory.connect(a.transport().local_address());

  auto reset = [&](uint64_t stream) {
    ucx_detail::Envelope env;
    env.sender = 5;
    env.stream = stream;
    std::vector<uint8_t> header(ucx_detail::kEnvelopeBytes);
    ucx_detail::encode_envelope(env, header.data());
    const std::string reason = "test reason";
    mallory.send(ucx_detail::kResetAmId, header, {reason.begin(), reason.end()});
  };
  reset(first.stream + 1);  // not a's stream: ignored
  mallory.progress_until([] { return true; }, 100ms);
  CHECK(a.failures().empty());
  reset(first.stream);
  REQUIRE(mallory.progress_until([&] { return a.failures().size() >= 1; }));
  CHECK(a.failures()[0].first == 5);
  CHECK_THAT(a.failures()[0].second, Catch::Contains("mallory") && Catch::Contains("test reason"));

  a.send(5, make_message(2));
  REQUIRE(mallory.wait_frames(2));
  CHECK(mallory.frames()[1].stream != first.stream);
  CHECK(mallory.frames()[1].seq == 0);
}

#endif  // BRAID_HAVE_UCX
