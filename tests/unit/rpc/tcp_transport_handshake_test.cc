// The handshake against raw peers, step by step: which of two racing connections survives (the one the
// lower worker id initiated), that queued messages follow the survivor in order, and handshake failures.
#include "tcp_test_harness.h"

using namespace braid;
using namespace braid::rpc;
using namespace braid::rpc::test;

TEST_CASE("tcp transport: racing connects keep the connection initiated by the lower id", "[rpc][tcp]") {
  RawListener peer_listener;  // plays worker 1's listening address
  SECTION("this worker has the lower id: its own connection survives") {
    Node a(0);
    a.transport().add_peers({PeerInfo{1, "raw1", peer_listener.address()}});
    a.send(1, make_message(10, {}, "first"));
    auto ours = peer_listener.accept();
    REQUIRE(ours);
    const auto [hello, unused] = read_frame(*ours);
    CHECK(hello.type == MessageType::kHello);
    CHECK(hello.id == 0);
    // Worker 1 connects too before answering: a declines that connection.
    RawClient theirs(a.transport().local_address());
    theirs.write(hello_from(1));
    CHECK(theirs.closed_within());
    a.send(1, make_message(11, {}, "second"));
    // Worker 1 answers on a's connection: both queued messages follow, in order.
    ours->write(hello_from(1));
    const auto [h1, m1] = read_frame(*ours);
    const auto [h2, m2] = read_frame(*ours);
    CHECK(h1.type == MessageType::kCall);
    CHECK(meta_text(m1) == "first");
    CHECK(meta_text(m2) == "second");
    ours->write(frame_of(make_message(12, {}, "reply", MessageType::kResult)));
    REQUIRE(a.wait_messages(1));
    CHECK(a.messages()[0].from == 1);
    CHECK(a.failures().empty());
  }
  SECTION("this worker has the higher id: it adopts the incoming connection and abandons its own") {
    Node a(2);
    a.transport().add_peers({PeerInfo{1, "raw1", peer_listener.address()}});
    a.send(1, make_message(10, {}, "first"));
    auto ours = peer_listener.accept();
    REQUIRE(ours);
    const auto [hello, unused] = read_frame(*ours);
    CHECK(hello.id == 2);
    RawClient theirs(a.transport().local_address());
    handshake(theirs, 1, 2);  // accepted: the answer is a's hello
    const auto [h1, m1] = read_frame(theirs);
    CHECK(meta_text(m1) == "first");
    CHECK(ours->closed_within());  // a's own attempt is abandoned
    a.send(1, make_message(11, {}, "second"));
    const auto [h2, m2] = read_frame(theirs);
    CHECK(meta_text(m2) == "second");
    CHECK(eventually([&] { return a.tcp().connection_count() == 1; }));
    CHECK(a.failures().empty());
  }
}

TEST_CASE("tcp transport: a peer that never answers the hello is retried, then reported", "[rpc][tcp]") {
  RawListener peer_listener;
  TransportOptions options;
  options.connect_retries = 2;
  options.connect_backoff = std::chrono::milliseconds(1);
  options.connect_backoff_max = std::chrono::milliseconds(1);
  Node a(0, options);
  a.transport().add_peers({PeerInfo{1, "mute", peer_listener.address()}});
  a.send(1, make_message(1));
  // Attempt 1: the peer answers as the wrong worker; attempt 2: it closes without answering.
  auto first = peer_listener.accept();
  REQUIRE(first);
  read_frame(*first);
  first->write(hello_from(5));
  CHECK(first->closed_within());
  auto second = peer_listener.accept();
  REQUIRE(second);
  read_frame(*second);
  second.reset();
  REQUIRE(a.wait_failures(1));
  const auto failure = a.failures()[0];
  CHECK(failure.first == 1);
  CHECK_THAT(failure.second, Catch::Contains("cannot reach worker 1 'mute'"));
  CHECK_THAT(failure.second, Catch::Contains("after 2 connection attempts (1 queued message(s) dropped)"));
}

TEST_CASE("tcp transport: handshake_timeout closes a connection that never says hello", "[rpc][tcp]") {
  TransportOptions options;
  options.handshake_timeout = std::chrono::milliseconds(200);
  Node a(0, options);
  const auto t0 = std::chrono::steady_clock::now();
  RawClient silent(a.transport().local_address(), /*authenticate=*/false);
  REQUIRE(silent.read(security::kChallengeBytes).size() == security::kChallengeBytes);  // then nothing
  // Closed after the option's 200 ms, well before the default 5 s.
  CHECK(silent.closed_within(std::chrono::milliseconds(3000)));
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= std::chrono::milliseconds(150));
  CHECK(a.failures().empty());  // a stranger that never said who it is costs no failure report
}

TEST_CASE("tcp transport: a stranger without the job secret is refused before its first frame", "[rpc][tcp][security]") {
  Node a(0);
  SECTION("a wrong secret gets no proof, and the connection closes") {
    RawClient stranger(a.transport().local_address(), /*authenticate=*/false);
    CHECK_FALSE(testing::raw_client_handshake(stranger.socket(),
                                              security::JobSecret::from_text("not-this-jobs-secret", "test"),
                                              security::Service::kRpcTcp));
  }
  SECTION("a hello sent in place of the handshake (the old 32-byte hijack) is never read as one") {
    RawClient stranger(a.transport().local_address(), /*authenticate=*/false);
    REQUIRE(stranger.read(security::kChallengeBytes).size() == security::kChallengeBytes);
    auto hello = hello_from(3);
    hello.resize(security::kResponseBytes, 0);  // enough bytes to be taken as a response, and refused
    stranger.write(hello);
    CHECK(stranger.closed_within());
  }
  CHECK(a.failures().empty());  // a stranger costs no failure report
  // The transport still serves a peer that holds the secret.
  Node b(1);
  a.transport().add_peers({PeerInfo{1, "b", b.transport().local_address()}});
  b.transport().add_peers({PeerInfo{0, "a", a.transport().local_address()}});
  a.send(1, make_message(7, {}, "after the strangers"));
  REQUIRE(b.wait_messages(1));
  CHECK(meta_text(b.messages()[0].msg) == "after the strangers");
}

TEST_CASE("tcp transport: peers with different secrets cannot talk, and it is reported at once", "[rpc][tcp][security]") {
  TransportOptions other;
  other.secret = security::JobSecret::from_text("another-jobs-secret", "test");
  Node a(0);
  Node b(1, other);
  a.transport().add_peers({PeerInfo{1, "b", b.transport().local_address()}});
  b.transport().add_peers({PeerInfo{0, "a", a.transport().local_address()}});
  a.send(1, make_message(7, {}, "to a stranger"));
  REQUIRE(a.wait_failures(1));
  CHECK_THAT(a.failures()[0].second, Catch::Contains("authentication failed"));
  // One attempt: a refused secret is not retried through connect_retries.
  CHECK_THAT(a.failures()[0].second, Catch::Contains("not retried"));
  CHECK(b.messages().empty());
}

TEST_CASE("tcp transport: a listener without the secret never sees the hello", "[rpc][tcp][security]") {
  RawListener impostor;
  Node a(0);
  a.transport().add_peers({PeerInfo{1, "impostor", impostor.address()}});
  a.send(1, make_message(1, {}, "secret data"));
  auto conn = impostor.accept(5000ms, /*authenticate=*/false);
  REQUIRE(conn);
  CHECK_FALSE(testing::raw_server_handshake(conn->socket(), security::JobSecret::from_text("not-this-jobs-secret", "t"),
                                            security::Service::kRpcTcp));
  // Nothing but the 64-byte response left a: no hello, no message, while it waits for a proof.
  CHECK(conn->read(1, 300ms).empty());
  conn.reset();  // the impostor gives up, as a server that refused the response does
  REQUIRE(a.wait_failures(1));
  CHECK_THAT(a.failures()[0].second, Catch::Contains("authentication failed"));
}
