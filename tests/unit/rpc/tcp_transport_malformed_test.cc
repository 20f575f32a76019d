// Malformed input injected on raw sockets: the transport closes that connection (the socket sees EOF),
// reports a failure only for a connection that had named a known peer, and keeps serving a good peer.
#include <cstring>

#include "tcp_test_harness.h"

using namespace braid;
using namespace braid::rpc;
using namespace braid::rpc::test;

namespace {

template <class T>
void put(std::vector<uint8_t>& bytes, size_t at, T v) {
  std::memcpy(bytes.data() + at, &v, sizeof(T));
}

}  // namespace

TEST_CASE("tcp transport: malformed input closes only that connection", "[rpc][tcp]") {
  Node a(0), b(1);
  introduce({&a, &b});
  // Worker 7 is a known peer of a; raw sockets play it.
  a.transport().add_peers({PeerInfo{7, "raw7", bytes_of("127.0.0.1:1")}});
  size_t expected_failures = 0;
  std::string failure_text;

  SECTION("bad magic") {
    RawClient raw(a.transport().local_address());
    auto bytes = hello_from(1);
    put<uint32_t>(bytes, 0, 0xdeadbeef);
    raw.write(bytes);
    CHECK(raw.closed_within());
  }
  SECTION("bad version and bad type") {
    for (const auto& [at, value] : std::vector<std::pair<size_t, uint8_t>>{{4, 9}, {5, 0}, {5, 200}}) {
      RawClient raw(a.transport().local_address());
      auto bytes = hello_from(1);
      put<uint8_t>(bytes, at, value);
      raw.write(bytes);
      CHECK(raw.closed_within());
    }
  }
  SECTION("a frame before the hello") {
    RawClient raw(a.transport().local_address());
    raw.write(frame_of(make_message(5, {ones({4})}, "call")));
    CHECK(raw.closed_within());
  }
  SECTION("a hello naming an unknown worker, the receiver itself, or no valid id") {
    for (const uint64_t worker : {uint64_t{99}, uint64_t{0}, uint64_t{1} << 40}) {
      RawClient raw(a.transport().local_address());
      raw.write(hello_from(worker));
      CHECK(raw.closed_within());
    }
  }
  SECTION("a hello with a giant meta is refused before anything is read into memory") {
    RawClient raw(a.transport().local_address());
    auto bytes = hello_from(7);
    put<uint32_t>(bytes, 20, 60u << 20);  // within the meta limit, but no hello is that big
    raw.write(bytes);
    CHECK(raw.closed_within());
  }
  SECTION("a length beyond the limits after a valid hello") {
    RawClient raw(a.transport().local_address());
    handshake(raw, 7, 0);
    auto bytes = frame_of(make_message(1));
    put<uint64_t>(bytes, 24, uint64_t{1} << 40);  // 1 TiB of payload: over the 4 GiB limit
    raw.write(bytes);
    CHECK(raw.closed_within());
    expected_failures = 1;
    failure_text = "exceeds the limit";
  }
  SECTION("a truncated tensor table after a valid hello") {
    RawClient raw(a.transport().local_address());
    handshake(raw, 7, 0);
    auto bytes = frame_of(make_message(1, {ones({2, 2})}));
    put<uint8_t>(bytes, kFrameHeaderBytes + 1, 3);  // 3 dims, but the table holds 2 sizes
    raw.write(bytes);
    CHECK(raw.closed_within());
    expected_failures = 1;
    failure_text = "sizes truncated";
  }
  SECTION("a second hello on an open connection") {
    RawClient raw(a.transport().local_address());
    handshake(raw, 7, 0);
    raw.write(hello_from(7));
    CHECK(raw.closed_within());
    expected_failures = 1;
    failure_text = "a second hello";
  }
  SECTION("a connection that ends in the middle of a payload") {
    {
      RawClient raw(a.transport().local_address());
      handshake(raw, 7, 0);
      auto bytes = frame_of(make_message(1, {ones({1000})}));
      bytes.resize(bytes.size() / 2);
      raw.write(bytes);
    }  // closed here
    expected_failures = 1;
    failure_text = "closed in the middle of a tensor payload";
  }

  if (expected_failures > 0) {
    REQUIRE(a.wait_failures(expected_failures));
    const auto failures = a.failures();
    CHECK(failures[0].first == 7);
    CHECK_THAT(failures[0].second, Catch::Contains("worker 7 'raw7'"));
    CHECK_THAT(failures[0].second, Catch::Contains(failure_text));
  }
  // The good peer is served as before, and the refused sockets are gone.
  b.send(0, make_message(100, {ones({8})}, "still there?"));
  REQUIRE(a.wait_messages(1));
  CHECK(meta_text(a.messages()[0].msg) == "still there?");
  a.send(1, make_message(101, {}, "yes"));
  REQUIRE(b.wait_messages(1));
  CHECK(meta_text(b.messages()[0].msg) == "yes");
  CHECK(eventually([&] { return a.tcp().connection_count() == 1; }));
  CHECK(a.failures().size() == expected_failures);
  CHECK(b.failures().empty());
}

TEST_CASE("tcp transport: a stranger's malformed input costs no failure report", "[rpc][tcp]") {
  // Many bad connections in a row; the process and the transport are unaffected.
  Node a(0), b(1);
  introduce({&a, &b});
  for (int i = 0; i < 20; ++i) {
    RawClient raw(a.transport().local_address());
    std::vector<uint8_t> junk(64, static_cast<uint8_t>(i * 13));
    raw.write(junk);
    CHECK(raw.closed_within());
  }
  b.send(0, make_message(1));
  REQUIRE(a.wait_messages(1));
  CHECK(a.failures().empty());
}
