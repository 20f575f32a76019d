#include "security/stream_token.h"

#include <catch2/catch.hpp>

namespace braid::security {
namespace {

const JobSecret kSecret = JobSecret::from_text("the-first-job-secret", "test");
const JobSecret kOther = JobSecret::from_text("some-other-job-secret", "test");

StreamTokenFields fields() {
  StreamTokenFields f;
  f.sender = 3;
  f.receiver = 1;
  f.stream = 0x1234'5678'9abc'def0ull;
  f.receiver_nonce.fill(0x11);
  f.sender_nonce.fill(0x22);
  return f;
}

}  // namespace

TEST_CASE("stream token: the receiver's recomputation verifies it", "[security]") {
  const StreamToken token = stream_token(kSecret, fields());
  CHECK(verify_stream_token(kSecret, fields(), token));
  CHECK(token == stream_token(kSecret, fields()));  // deterministic: the receiver needs no state from the sender
}

TEST_CASE("stream token: another secret, and junk, are refused", "[security]") {
  CHECK_FALSE(verify_stream_token(kSecret, fields(), stream_token(kOther, fields())));
  StreamToken junk{};
  CHECK_FALSE(verify_stream_token(kSecret, fields(), junk));
  StreamToken flipped = stream_token(kSecret, fields());
  flipped[31] ^= 1;
  CHECK_FALSE(verify_stream_token(kSecret, fields(), flipped));
}

TEST_CASE("stream token: every field is bound", "[security]") {
  const StreamToken token = stream_token(kSecret, fields());
  auto changed = [&](auto&& edit) {
    StreamTokenFields f = fields();
    edit(f);
    return verify_stream_token(kSecret, f, token);
  };
  CHECK_FALSE(changed([](StreamTokenFields& f) { f.sender = 4; }));
  CHECK_FALSE(changed([](StreamTokenFields& f) { f.receiver = 2; }));
  CHECK_FALSE(changed([](StreamTokenFields& f) { std::swap(f.sender, f.receiver); }));  // reflected
  CHECK_FALSE(changed([](StreamTokenFields& f) { ++f.stream; }));
  CHECK_FALSE(changed([](StreamTokenFields& f) { f.receiver_nonce[0] ^= 1; }));  // another receiver incarnation
  CHECK_FALSE(changed([](StreamTokenFields& f) { f.sender_nonce[31] ^= 1; }));
  CHECK_FALSE(changed([](StreamTokenFields& f) { std::swap(f.sender_nonce, f.receiver_nonce); }));
  CHECK_FALSE(changed([](StreamTokenFields& f) { f.service = Service::kRpcTcp; }));
}

TEST_CASE("stream token: a sender that echoes the receiver's nonce is refused", "[security]") {
  StreamTokenFields f = fields();
  f.sender_nonce = f.receiver_nonce;
  CHECK_FALSE(verify_stream_token(kSecret, f, stream_token(kSecret, f)));
}

TEST_CASE("stream token: nonces are fresh", "[security]") {
  CHECK(fresh_nonce() != fresh_nonce());
}

}  // namespace braid::security
