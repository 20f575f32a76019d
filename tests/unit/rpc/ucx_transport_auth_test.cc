// The UCX transport's authentication (rpc/ucx/ucx_receiver.h, "Authentication"): a stream counts only
// once its first message proved the job secret; everything else is dropped unread and unanswered.
// Compiles to nothing without UCX.
#include "base/config.h"

#if BRAID_HAVE_UCX

#include <cstring>

#include "rpc/ucx/ucx_transport_impl.h"
#include "security/job_secret.h"
#include "tensor/compare.h"
#include "ucx_raw_worker.h"
#include "ucx_test_harness.h"

using namespace braid;
using namespace braid::rpc;
using namespace braid::rpc::ucx_test;

namespace {

const security::JobSecret kJobSecret = security::JobSecret::from_text("the-ucx-test-job-secret", "test");
const security::JobSecret kOtherSecret = security::JobSecret::from_text("a-stranger's-own-secret", "test");

TransportOptions with_secret(const security::JobSecret& secret) {
  TransportOptions options;
  options.secret = secret;
  return options;
}

// A node whose transport the test can ask how many messages it refused.
struct CountingNode {
  explicit CountingNode(int id, TransportOptions options = with_secret(kJobSecret)) {
    auto t = std::make_unique<ucx_detail::UcxTransport>(options);
    transport = t.get();
    node = std::make_unique<Node>(id, std::move(t));
  }
  // Waits (bounded) until the transport refused `n` messages in all.
  bool wait_refused(uint64_t n) const {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (transport->refused_messages() < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    return transport->refused_messages() >= n;
  }
  ucx_detail::UcxTransport* transport = nullptr;
  std::unique_ptr<Node> node;
};

}  // namespace

TEST_CASE("ucx transport: a worker with another secret cannot deliver a message, nor accept one",
          "[rpc][ucx][security]") {
  CountingNode b(1);
  CountingNode stranger(0, with_secret(kOtherSecret));
  Node c(2, with_secret(kJobSecret));
  // The stranger learned b's address (as if it had read the store) and b knows a worker 0 at its address:
  // only the secret tells them apart.
  introduce({stranger.node.get(), b.node.get(), &c});

  for (uint64_t i = 0; i < 3; ++i) stranger.node->send(1, make_message(i, {ones({4})}, "from the stranger"));
  stranger.node->send(1, make_message(3, {ones({1 << 18})}, "a rendezvous"));  // 1 MiB: never fetched
  REQUIRE(b.wait_refused(4));
  // b's handler never ran, b reported nothing against worker 0 (whose id the stranger used), and the
  // stranger got no answer (a reset would show up as a failure there).
  CHECK(b.node->messages().empty());
  CHECK(b.node->failures().empty());
  CHECK(stranger.node->failures().empty());

  // The other way: b's messages do not open the stranger's side either.
  b.node->send(0, make_message(10, {}, "to the stranger"));
  REQUIRE(stranger.wait_refused(1));
  CHECK(stranger.node->messages().empty());

  // Normal traffic is unaffected.
  c.send(1, make_message(20, {ones({4})}, "from c"));
  REQUIRE(b.node->wait_messages(1));
  CHECK(b.node->messages()[0].from == 2);
  CHECK(meta_of(b.node->messages()[0].msg) == "from c");
  CHECK(b.node->messages().size() == 1);
}

TEST_CASE("ucx transport: raw frames without a valid stream token are dropped unread and unanswered",
          "[rpc][ucx][security]") {
  TransportOptions options = with_secret(kJobSecret);
  options.limits.max_payload_bytes = 1 << 20;
  CountingNode b(1, options);
  RawWorker mallory;
  b.node->transport().add_peers({PeerInfo{5, "mallory", mallory.address()}});
  mallory.connect(b.node->transport().local_address());
  const Message hello = make_message(1, {full({4}, 2, DType::Int32)}, "hi");
  std::vector<uint8_t> payload(16);
  const int32_t twos[4] = {2, 2, 2, 2};
  std::memcpy(payload.data(), twos, 16);
  const Signer wrong{kOtherSecret, 1, b.node->transport().local_address(), mallory.nonce()};
  const Signer right{kJobSecret, 1, b.node->transport().local_address(), mallory.nonce()};
  uint64_t refused = 0;
  auto refused_one = [&] {
    ++refused;
    return mallory.progress_until([&] { return b.transport->refused_messages() >= refused; }, 0ms, true);
  };

  // No token at all, on the stream's first message and on a later one.
  mallory.send(ucx_detail::kFrameAmId, header_for(5, 40, 0, &hello), payload);
  REQUIRE(refused_one());
  mallory.send(ucx_detail::kFrameAmId, header_for(5, 41, 3, &hello), payload);
  REQUIRE(refused_one());
  // A token made with another secret.
  mallory.send(ucx_detail::kFrameAmId, header_for(5, 42, 0, &hello, &wrong), payload);
  REQUIRE(refused_one());
  // A right token for another stream, or claiming another worker (unknown to b, or b itself).
  std::vector<uint8_t> moved = header_for(5, 43, 0, &hello, &right);
  ucx_detail::Envelope env = ucx_detail::decode_envelope(moved);
  env.stream = 44;
  ucx_detail::encode_envelope(env, moved.data());
  mallory.send(ucx_detail::kFrameAmId, moved, payload);
  REQUIRE(refused_one());
  mallory.send(ucx_detail::kFrameAmId, header_for(9, 45, 0, &hello, &right), payload);
  REQUIRE(refused_one());
  mallory.send(ucx_detail::kFrameAmId, header_for(1, 46, 0, &hello, &right), payload);
  REQUIRE(refused_one());
  // Unauthenticated, a frame far over b's limits is not even looked at: no "exceeds the limit" failure,
  // which an authenticated stream gets for it (ucx_transport_failure_test.cc).
  const Message huge = make_message(2, {ones({1 << 19})});
  mallory.send(ucx_detail::kFrameAmId, header_for(5, 47, 0, &huge), std::vector<uint8_t>(16));
  REQUIRE(refused_one());
  CHECK(b.node->messages().empty());
  CHECK(b.node->failures().empty());
  CHECK(mallory.resets().empty());
  CHECK(mallory.frames().empty());  // b never connected back

  // The same frame with the right token opens the stream, and its later messages follow without one.
  mallory.send(ucx_detail::kFrameAmId, header_for(5, 48, 0, &hello, &right), payload);
  mallory.send(ucx_detail::kFrameAmId, header_for(5, 48, 1, &hello), payload);
  REQUIRE(mallory.progress_until([&] { return b.node->messages().size() >= 2; }, 0ms, true));
  CHECK(b.node->messages()[0].from == 5);
  CHECK(equal(b.node->messages()[1].msg.tensors.at(0), full({4}, 2, DType::Int32)));
  CHECK(b.transport->refused_messages() == refused);
  // A token on a later message is malformed (the stream is authenticated, so b says so and resets it).
  mallory.send(ucx_detail::kFrameAmId, header_for(5, 48, 2, &hello, &right), payload);
  REQUIRE(mallory.progress_until([&] { return b.node->failures().size() >= 1; }, 0ms, true));
  CHECK_THAT(b.node->failures()[0].second, Catch::Contains("carries a stream token"));
}

TEST_CASE("ucx transport: a stream's first message carries a token that the receiver's secret verifies",
          "[rpc][ucx][security]") {
  Node a(0, with_secret(kJobSecret));
  RawWorker receiver;  // plays worker 5, and checks what a sends
  a.transport().add_peers({PeerInfo{5, "raw", receiver.address()}});
  a.send(5, make_message(1));
  a.send(5, make_message(2, {ones({4})}));
  REQUIRE(receiver.wait_frames(2));
  const ucx_detail::Envelope first = receiver.frames()[0];
  CHECK(first.seq == 0);
  REQUIRE(first.has_token());
  CHECK_FALSE(receiver.frames()[1].has_token());
  security::StreamTokenFields fields;
  fields.sender = 0;
  fields.receiver = 5;
  fields.stream = first.stream;
  fields.receiver_nonce = receiver.nonce();
  fields.sender_nonce = ucx_detail::unpack_addresses(a.transport().local_address(), "test").nonce;
  const auto& header = receiver.headers()[0];
  REQUIRE(header.size() >= ucx_detail::kEnvelopeBytes + ucx_detail::kStreamTokenBytes);
  const std::span<const uint8_t, security::kMacBytes> token(header.data() + ucx_detail::kEnvelopeBytes,
                                                            security::kMacBytes);
  CHECK(security::verify_stream_token(kJobSecret, fields, token));
  CHECK_FALSE(security::verify_stream_token(kOtherSecret, fields, token));
}

#endif  // BRAID_HAVE_UCX
