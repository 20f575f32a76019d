// TCPStore frames (store/tcp_protocol.h).
//
// Input byte 0 picks what the rest is:
//   even  a request body, as the server decodes it (store/tcp_store_request.h). An accepted body must encode
//         back to the same bytes: decode_request() admits exactly one encoding of each request.
//   odd   a response body, read by a wire::Reader through the field sequence that input byte 1 spells
//         (two bits per field, lowest first: u8, bytes, i64, strs; four fields), as the client reads its
//         responses (a string is read as bytes are).
//         Every read must stay inside the body and report a short body as nullopt.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "store/tcp_store_request.h"

namespace {

using braid::store::Bytes;
namespace wire = braid::store::wire;

void request(const Bytes& body) {
  std::string error;
  const auto req = wire::decode_request(body, error);
  if (!req) {
    if (error.empty()) braid::fuzz::fail("fuzz_store_frames", "a rejected request without a reason");
    return;
  }
  if (wire::encode_request(*req) != body) {
    braid::fuzz::fail("fuzz_store_frames", "decode_request/encode_request round trip differs for " +
                                               wire::command_name(static_cast<uint8_t>(req->command)));
  }
}

void response(uint8_t fields, const Bytes& body) {
  wire::Reader r(body);
  size_t consumed = 0;
  const auto status = r.u8();
  if (!status) return;
  consumed += 1;
  for (int i = 0; i < 4; ++i) {
    switch ((fields >> (2 * i)) & 3) {
      case 0: {
        if (!r.u8()) return;
        consumed += 1;
        break;
      }
      case 1: {
        auto b = r.bytes();
        if (!b) return;
        consumed += 4 + b->size();
        break;
      }
      case 2: {
        if (!r.i64()) return;
        consumed += 8;
        break;
      }
      case 3: {
        auto v = r.strs();
        if (!v) return;
        consumed += 4;
        for (const auto& s : *v) consumed += 4 + s.size();
        break;
      }
    }
    if (consumed > body.size()) braid::fuzz::fail("fuzz_store_frames", "the Reader read past the body");
  }
  if (r.done() != (consumed == body.size())) braid::fuzz::fail("fuzz_store_frames", "Reader::done() is wrong");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  if ((data[0] & 1) == 0) {
    request(Bytes(data + 1, data + size));
  } else {
    response(data[1], Bytes(data + 2, data + size));
  }
  return 0;
}
