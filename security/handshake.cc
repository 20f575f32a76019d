#include "security/handshake.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>

#include "base/check.h"

namespace braid::security {

namespace {

constexpr std::array<uint8_t, 8> kMagic = {'B', 'R', 'A', 'I', 'D', 'A', 'U', '1'};

void random_bytes(uint8_t* p, size_t n) {
  BRAID_CHECK_TYPED(Error, RAND_bytes(p, static_cast<int>(n)) == 1, "handshake: OpenSSL's RAND_bytes failed");
}

// HMAC-SHA256(key, label | service | server nonce | client nonce).
std::array<uint8_t, kMacBytes> mac(const std::array<uint8_t, kKeyBytes>& key, std::string_view label, Service service,
                                   const uint8_t* server_nonce, const uint8_t* client_nonce) {
  std::array<uint8_t, 16 + 1 + 2 * kNonceBytes> message{};
  BRAID_ASSERT(label.size() <= 16, "handshake label too long");
  std::memcpy(message.data(), label.data(), label.size());
  message[16] = static_cast<uint8_t>(service);
  std::memcpy(message.data() + 17, server_nonce, kNonceBytes);
  std::memcpy(message.data() + 17 + kNonceBytes, client_nonce, kNonceBytes);
  std::array<uint8_t, kMacBytes> out{};
  unsigned int n = 0;
  const bool ok = HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), message.data(), message.size(),
                       out.data(), &n) != nullptr;
  BRAID_CHECK_TYPED(Error, ok && n == kMacBytes, "handshake: HMAC-SHA256 failed in OpenSSL");
  return out;
}

bool equal(const uint8_t* a, const uint8_t* b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

constexpr std::string_view kClientLabel = "braid-client-v1";
constexpr std::string_view kServerLabel = "braid-server-v1";

}  // namespace

std::string_view service_name(Service s) {
  switch (s) {
    case Service::kStore: return "TCPStore";
    case Service::kRpcTcp: return "RPC (tcp)";
    case Service::kRpcUcx: return "RPC (ucx)";
    case Service::kStatus: return "status server";
    case Service::kLauncher: return "launcher";
  }
  return "unknown service";
}

ServerHandshake::ServerHandshake(const JobSecret& secret, Service service) : key_(secret.key()), service_(service) {
  std::memcpy(challenge_.data(), kMagic.data(), kMagic.size());
  random_bytes(challenge_.data() + kMagic.size(), kNonceBytes);
}

std::optional<Proof> ServerHandshake::verify(std::span<const uint8_t, kResponseBytes> response) const {
  const uint8_t* server_nonce = challenge_.data() + kMagic.size();
  const uint8_t* client_nonce = response.data();
  const auto expected = mac(key_, kClientLabel, service_, server_nonce, client_nonce);
  if (!equal(expected.data(), response.data() + kNonceBytes, kMacBytes)) return std::nullopt;
  // A client that echoes our own nonce as its own would get a proof it could replay as a response.
  if (equal(server_nonce, client_nonce, kNonceBytes)) return std::nullopt;
  return mac(key_, kServerLabel, service_, server_nonce, client_nonce);
}

ClientHandshake::ClientHandshake(const JobSecret& secret, Service service) : key_(secret.key()), service_(service) {
  random_bytes(client_nonce_.data(), kNonceBytes);
}

std::optional<Response> ClientHandshake::respond(std::span<const uint8_t, kChallengeBytes> challenge) {
  if (!std::equal(kMagic.begin(), kMagic.end(), challenge.begin())) return std::nullopt;
  std::memcpy(server_nonce_.data(), challenge.data() + kMagic.size(), kNonceBytes);
  Response r{};
  std::memcpy(r.data(), client_nonce_.data(), kNonceBytes);
  const auto m = mac(key_, kClientLabel, service_, server_nonce_.data(), client_nonce_.data());
  std::memcpy(r.data() + kNonceBytes, m.data(), kMacBytes);
  responded_ = true;
  return r;
}

bool ClientHandshake::verify(std::span<const uint8_t, kProofBytes> proof) const {
  if (!responded_) return false;
  const auto expected = mac(key_, kServerLabel, service_, server_nonce_.data(), client_nonce_.data());
  return equal(expected.data(), proof.data(), kProofBytes);
}

}  // namespace braid::security
