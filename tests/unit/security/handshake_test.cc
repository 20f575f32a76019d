#include "security/handshake.h"

#include <catch2/catch.hpp>

#include <algorithm>

namespace braid::security {
namespace {

const JobSecret kSecret = JobSecret::from_text("the-first-job-secret", "test");
const JobSecret kOther = JobSecret::from_text("some-other-job-secret", "test");

}  // namespace

TEST_CASE("handshake: both sides holding the secret authenticate each other", "[security]") {
  ServerHandshake server(kSecret, Service::kStore);
  ClientHandshake client(kSecret, Service::kStore);
  const auto response = client.respond(server.challenge());
  REQUIRE(response);
  const auto proof = server.verify(*response);
  REQUIRE(proof);
  CHECK(client.verify(*proof));
}

TEST_CASE("handshake: a client with another secret is refused, and learns no proof", "[security]") {
  ServerHandshake server(kSecret, Service::kStore);
  ClientHandshake client(kOther, Service::kStore);
  const auto response = client.respond(server.challenge());
  REQUIRE(response);
  CHECK_FALSE(server.verify(*response));
}

TEST_CASE("handshake: a server with another secret fails the client's check", "[security]") {
  ServerHandshake honest(kSecret, Service::kStore);
  ServerHandshake impostor(kOther, Service::kStore);
  ClientHandshake client(kSecret, Service::kStore);
  const auto response = client.respond(impostor.challenge());
  REQUIRE(response);
  CHECK_FALSE(impostor.verify(*response));  // it cannot check the client either
  // Nor can it borrow a proof from a real server: the proof covers the impostor's own nonce.
  ClientHandshake relay(kSecret, Service::kStore);
  const auto relayed = relay.respond(honest.challenge());
  const auto proof = honest.verify(*relayed);
  REQUIRE(proof);
  CHECK_FALSE(client.verify(*proof));
}

TEST_CASE("handshake: a response for one service does not open another", "[security]") {
  ServerHandshake status(kSecret, Service::kStatus);
  ClientHandshake store_client(kSecret, Service::kStore);
  CHECK_FALSE(status.verify(*store_client.respond(status.challenge())));
}

TEST_CASE("handshake: junk, a replayed response and an echoed nonce are refused", "[security]") {
  ServerHandshake server(kSecret, Service::kRpcTcp);
  Response junk{};
  junk.fill(0x41);
  CHECK_FALSE(server.verify(junk));
  // A response recorded from another connection fails: the server's nonce is fresh each time.
  ServerHandshake earlier(kSecret, Service::kRpcTcp);
  ClientHandshake client(kSecret, Service::kRpcTcp);
  const auto recorded = client.respond(earlier.challenge());
  CHECK_FALSE(server.verify(*recorded));
  // A "client" that echoes the server's nonce as its own is refused before any MAC could match.
  Response echo{};
  std::copy_n(server.challenge().begin() + 8, kNonceBytes, echo.begin());
  CHECK_FALSE(server.verify(echo));
}

TEST_CASE("handshake: a client refuses a challenge that is no braid challenge", "[security]") {
  ClientHandshake client(kSecret, Service::kStore);
  Challenge http{};
  const std::string text = "HTTP/1.1 200 OK\r\n";
  std::copy(text.begin(), text.end(), http.begin());
  CHECK_FALSE(client.respond(http));
  ClientHandshake fresh(kSecret, Service::kStore);
  Proof proof{};
  CHECK_FALSE(fresh.verify(proof));  // no proof is valid before a response was sent
}

TEST_CASE("handshake: challenges are fresh", "[security]") {
  ServerHandshake a(kSecret, Service::kStore), b(kSecret, Service::kStore);
  CHECK(a.challenge() != b.challenge());
  CHECK(std::equal(a.challenge().begin(), a.challenge().begin() + 8, b.challenge().begin()));
}

}  // namespace braid::security
