#include "security/stream_token.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>
#include <string_view>

#include "base/check.h"

namespace braid::security {

namespace {

constexpr std::string_view kStreamLabel = "braid-stream-v1";
constexpr size_t kLabelBytes = 16;

template <class T>
size_t put(uint8_t* out, size_t at, T v) {
  std::memcpy(out + at, &v, sizeof(T));  // little-endian hosts only (rpc/wire.cc asserts it for the wire)
  return at + sizeof(T);
}

}  // namespace

StreamToken stream_token(const JobSecret& secret, const StreamTokenFields& f) {
  std::array<uint8_t, kLabelBytes + 1 + 4 + 4 + 8 + 2 * kNonceBytes> message{};
  static_assert(kStreamLabel.size() <= kLabelBytes);
  std::memcpy(message.data(), kStreamLabel.data(), kStreamLabel.size());
  size_t at = put<uint8_t>(message.data(), kLabelBytes, static_cast<uint8_t>(f.service));
  at = put<int32_t>(message.data(), at, f.sender);
  at = put<int32_t>(message.data(), at, f.receiver);
  at = put<uint64_t>(message.data(), at, f.stream);
  std::memcpy(message.data() + at, f.receiver_nonce.data(), kNonceBytes);
  std::memcpy(message.data() + at + kNonceBytes, f.sender_nonce.data(), kNonceBytes);
  StreamToken out{};
  unsigned int n = 0;
  const auto& key = secret.key();
  const bool ok = HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), message.data(), message.size(),
                       out.data(), &n) != nullptr;
  BRAID_CHECK_TYPED(Error, ok && n == kMacBytes, "stream token: HMAC-SHA256 failed in OpenSSL");
  return out;
}

bool verify_stream_token(const JobSecret& secret, const StreamTokenFields& fields,
                         std::span<const uint8_t, kMacBytes> token) {
  if (CRYPTO_memcmp(fields.receiver_nonce.data(), fields.sender_nonce.data(), kNonceBytes) == 0) return false;
  const StreamToken expected = stream_token(secret, fields);
  return CRYPTO_memcmp(expected.data(), token.data(), kMacBytes) == 0;
}

void random_bytes(std::span<uint8_t> out) {
  BRAID_CHECK_TYPED(Error, RAND_bytes(out.data(), static_cast<int>(out.size())) == 1,
                    "security: OpenSSL's RAND_bytes failed for {} bytes", out.size());
}

Nonce fresh_nonce() {
  Nonce n{};
  random_bytes(n);
  return n;
}

}  // namespace braid::security
