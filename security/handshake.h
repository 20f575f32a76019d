// The challenge-response handshake that opens every braid connection, before either side reads anything
// else from the other (docs/SECURITY.md, docs/WIRE.md "Authentication").
//
//   server -> client   challenge  40 bytes: magic "BRAIDAU1" | server nonce (32 random bytes)
//   client -> server   response   64 bytes: client nonce (32) | HMAC(key, "client" | service | nonces)
//   server -> client   proof      32 bytes: HMAC(key, "server" | service | nonces)
//
// Both sides prove they hold the job secret without sending it; fresh nonces on both sides stop replay,
// distinct labels stop a reflected MAC, and the service byte stops a MAC made for one server from opening
// another. Every message has a fixed size, so nothing is allocated from what an unauthenticated peer
// sends. There is no encryption: see docs/SECURITY.md for what that leaves open.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "security/job_secret.h"

namespace braid::security {

// Which server a handshake opens. Part of every MAC.
enum class Service : uint8_t { kStore = 1, kRpcTcp = 2, kRpcUcx = 3, kStatus = 4, kLauncher = 5 };
std::string_view service_name(Service s);

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
inline constexpr size_t kChallengeBytes = 8 + kNonceBytes;
inline constexpr size_t kResponseBytes = kNonceBytes + kMacBytes;
inline constexpr size_t kProofBytes = kMacBytes;

using Challenge = std::array<uint8_t, kChallengeBytes>;
using Response = std::array<uint8_t, kResponseBytes>;
using Proof = std::array<uint8_t, kProofBytes>;

// The accepting side of one connection.
class ServerHandshake {
 public:
  ServerHandshake(const JobSecret& secret, Service service);
  const Challenge& challenge() const { return challenge_; }
  // The proof to send back, or nullopt when the response's MAC is wrong (drop the connection).
  std::optional<Proof> verify(std::span<const uint8_t, kResponseBytes> response) const;

 private:
  std::array<uint8_t, kKeyBytes> key_;
  Service service_;
  Challenge challenge_{};
};

// The connecting side of one connection.
class ClientHandshake {
 public:
  ClientHandshake(const JobSecret& secret, Service service);
  // The response to send, or nullopt when the challenge is no braid challenge (a wrong port, another
  // program, an old braid).
  std::optional<Response> respond(std::span<const uint8_t, kChallengeBytes> challenge);
  // Whether the server's proof is right: it holds the secret too.
  bool verify(std::span<const uint8_t, kProofBytes> proof) const;

 private:
  std::array<uint8_t, kKeyBytes> key_;
  Service service_;
  std::array<uint8_t, kNonceBytes> server_nonce_{};
  std::array<uint8_t, kNonceBytes> client_nonce_{};
  bool responded_ = false;
};

}  // namespace braid::security
