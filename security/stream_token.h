// A one-way proof of the job secret for transports that have no connection to run the handshake on
// (RPC over UCX: a peer makes an endpoint from a published worker address and sends active messages;
// there is no accept, and a round trip before the first message would cost a latency per stream).
//
// Each side draws a nonce per incarnation and publishes it through the authenticated store, next to its
// address. The first message of every stream then carries
//   token = HMAC-SHA256(key, "braid-stream-v1" | service | sender id | receiver id | stream |
//                            receiver's nonce | sender's nonce)
// (label padded to 16 bytes, ids as little-endian int32, stream as little-endian uint64), which the
// receiver recomputes from what it knows itself. The receiver's nonce makes a token from another job or an
// earlier incarnation of the receiver useless; the ids and the stream bind it to one sender, one receiver
// and one stream; the service byte to one kind of server; the label keeps it apart from the handshake's
// MACs (security/handshake.h), so neither can stand in for the other. It does not stop the replay of a
// recorded first message to the same receiver incarnation: that needs a listener on the path, which the
// MAC-only design leaves to encryption (docs/SECURITY.md).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "security/handshake.h"
#include "security/job_secret.h"

namespace braid::security {

using Nonce = std::array<uint8_t, kNonceBytes>;
using StreamToken = std::array<uint8_t, kMacBytes>;

struct StreamTokenFields {
  Service service = Service::kRpcUcx;
  int32_t sender = -1;
  int32_t receiver = -1;
  uint64_t stream = 0;
  Nonce receiver_nonce{};
  Nonce sender_nonce{};
};

StreamToken stream_token(const JobSecret& secret, const StreamTokenFields& fields);
// Whether `token` is the one for `fields` (compared in constant time). False also when the two nonces are
// equal: a sender that echoes the receiver's nonce is not one of its peers.
bool verify_stream_token(const JobSecret& secret, const StreamTokenFields& fields,
                         std::span<const uint8_t, kMacBytes> token);

// `out.size()` random bytes from OpenSSL's RAND_bytes (throws Error if it fails).
void random_bytes(std::span<uint8_t> out);
Nonce fresh_nonce();

}  // namespace braid::security
