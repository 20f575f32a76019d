// A test's raw TCP client that proves (or fails to prove) the job secret the way braid's clients do, so
// that a test can then send bytes no braid client would: junk frames, huge headers, half frames.
#pragma once

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>

#include "security/handshake.h"

namespace braid::testing {

// Runs the client side of the handshake on a connected blocking socket. Returns whether the server sent
// a valid proof; false when it closed the connection instead (a refused secret).
inline bool raw_client_handshake(boost::asio::ip::tcp::socket& sock, const security::JobSecret& secret,
                                 security::Service service) {
  namespace asio = boost::asio;
  security::ClientHandshake hs(secret, service);
  security::Challenge challenge{};
  boost::system::error_code ec;
  asio::read(sock, asio::buffer(challenge), ec);
  if (ec) return false;
  auto response = hs.respond(challenge);
  if (!response) return false;
  asio::write(sock, asio::buffer(*response), ec);
  if (ec) return false;
  security::Proof proof{};
  asio::read(sock, asio::buffer(proof), ec);
  return !ec && hs.verify(proof);
}

// The server side on an accepted blocking socket: challenge, check the response, prove. Returns whether
// the client held `secret` (if not, nothing more was sent to it).
inline bool raw_server_handshake(boost::asio::ip::tcp::socket& sock, const security::JobSecret& secret,
                                 security::Service service) {
  namespace asio = boost::asio;
  security::ServerHandshake hs(secret, service);
  boost::system::error_code ec;
  asio::write(sock, asio::buffer(hs.challenge()), ec);
  if (ec) return false;
  security::Response response{};
  asio::read(sock, asio::buffer(response), ec);
  if (ec) return false;
  const auto proof = hs.verify(response);
  if (!proof) return false;
  asio::write(sock, asio::buffer(*proof), ec);
  return !ec;
}

// Whether the server closes `sock` (EOF or reset) rather than sending anything more.
inline bool closed_by_server(boost::asio::ip::tcp::socket& sock) {
  std::array<uint8_t, 64> buf{};
  boost::system::error_code ec;
  const size_t n = sock.read_some(boost::asio::buffer(buf), ec);
  return ec && n == 0;
}

}  // namespace braid::testing
