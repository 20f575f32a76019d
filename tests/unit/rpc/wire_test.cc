// The RPC wire codec (rpc/wire.h): a round trip of every dtype, and one malformed-field case per check.
#include <catch2/catch.hpp>

#include <cstring>

#include "rpc/wire.h"
#include "tensor/compare.h"
#include "tensor/factory.h"

using namespace braid;
using namespace braid::rpc;

namespace {

// The whole frame as one byte string: what a transport writes (prefix, then the payload spans).
std::vector<uint8_t> encode(const Message& msg) {
  std::vector<uint8_t> bytes;
  frame_prefix(msg, bytes);
  for (const auto span : payload_spans(msg)) bytes.insert(bytes.end(), span.begin(), span.end());
  return bytes;
}

// What a transport does on receipt: header, body, then the payload scattered into the tensors.
Message decode(const std::vector<uint8_t>& bytes, const WireLimits& limits = {}) {
  const FrameHeader h = decode_header(bytes, limits);
  REQUIRE(bytes.size() >= kFrameHeaderBytes + h.body_bytes());
  Message msg = decode_body(h, std::span<const uint8_t>(bytes).subspan(kFrameHeaderBytes, h.body_bytes()));
  size_t at = kFrameHeaderBytes + h.body_bytes();
  for (const auto span : receive_spans(msg)) {
    REQUIRE(at + span.size() <= bytes.size());
    std::memcpy(span.data(), bytes.data() + at, span.size());
    at += span.size();
  }
  REQUIRE(at == bytes.size());
  return msg;
}

// The message of the WireError that `f` throws ("" and a test failure when it throws nothing or else).
template <class F>
std::string wire_error(F&& f) {
  try {
    f();
  } catch (const WireError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected a WireError, got: " << e.what());
  }
  FAIL("expected a WireError, nothing was thrown");
  return {};
}

template <class T>
void put(std::vector<uint8_t>& bytes, size_t at, T v) {
  std::memcpy(bytes.data() + at, &v, sizeof(T));
}

// A valid frame: one float32 [2, 3] tensor and 5 bytes of meta (table 4 + 16 bytes at offset 32).
std::vector<uint8_t> sample_frame() {
  Message msg;
  msg.type = MessageType::kCall;
  msg.id = 77;
  msg.meta = {1, 2, 3, 4, 5};
  msg.tensors = {arange(6, DType::Float32).view({2, 3})};
  return encode(msg);
}

constexpr size_t kTableAt = kFrameHeaderBytes;

}  // namespace

TEST_CASE("wire: a message with tensors of every dtype round-trips", "[rpc][wire]") {
  Message msg;
  msg.type = MessageType::kResult;
  msg.id = 0x0123456789abcdefULL;
  msg.meta = {'m', 'e', 't', 'a', 0, 255};
  for (const DType dt : kRealDTypes) {
    msg.tensors.push_back(arange(12, DType::Int64).view({3, 4}).to(dt));
    msg.requires_grad.push_back(is_floating(dt) ? 1 : 0);
  }
  msg.tensors.push_back(empty({0}, DType::Float32));        // empty
  msg.requires_grad.push_back(1);
  msg.tensors.push_back(empty({3, 0, 2}, DType::Int32));    // empty with a zero inner dim
  msg.requires_grad.push_back(0);
  msg.tensors.push_back(scalar_tensor(2.5, DType::Float64));  // 0-dim
  msg.requires_grad.push_back(1);

  const auto bytes = encode(msg);
  const FrameHeader h = header_of(msg);
  CHECK(h.payload_bytes == [&] {
    uint64_t n = 0;
    for (const auto& t : msg.tensors) n += t.nbytes();
    return n;
  }());
  CHECK(bytes.size() == kFrameHeaderBytes + h.body_bytes() + h.payload_bytes);

  const Message back = decode(bytes);
  CHECK(back.type == msg.type);
  CHECK(back.id == msg.id);
  CHECK(back.meta == msg.meta);
  CHECK(back.requires_grad == msg.requires_grad);
  REQUIRE(back.tensors.size() == msg.tensors.size());
  for (size_t i = 0; i < msg.tensors.size(); ++i) {
    INFO("tensor " << i << " " << msg.tensors[i].describe());
    CHECK(back.tensors[i].dtype() == msg.tensors[i].dtype());
    CHECK(back.tensors[i].shape() == msg.tensors[i].shape());
    CHECK(equal(back.tensors[i], msg.tensors[i]));
  }
}

TEST_CASE("wire: a message without tensors or meta is just the header", "[rpc][wire]") {
  Message msg;
  msg.type = MessageType::kPing;
  msg.id = 3;
  const auto bytes = encode(msg);
  CHECK(bytes.size() == kFrameHeaderBytes);
  const Message back = decode(bytes);
  CHECK(back.type == MessageType::kPing);
  CHECK(back.id == 3);
  CHECK(back.tensors.empty());
  CHECK(back.meta.empty());
  CHECK(payload_spans(msg).empty());
}

TEST_CASE("wire: the extension travels between the table and the meta, with requires-grad flags", "[rpc][wire]") {
  Message msg;
  msg.type = MessageType::kCall;
  msg.id = 9;
  msg.tensors = {arange(4, DType::Float32), arange(2, DType::Int64)};
  msg.requires_grad = {1, 0};
  msg.ext = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  msg.meta = {42, 43};
  const auto bytes = encode(msg);
  CHECK(bytes[6] == 16);  // the extension length sits where the reserved field was
  const Message back = decode(bytes);
  CHECK(back.ext == msg.ext);
  CHECK(back.meta == msg.meta);
  CHECK(back.requires_grad == std::vector<uint8_t>{1, 0});
  REQUIRE(back.tensors.size() == 2);
  CHECK(equal(back.tensors[0], msg.tensors[0]));

  msg.ext.assign(65536, 0);
  std::vector<uint8_t> prefix;
  CHECK_THROWS_WITH(frame_prefix(msg, prefix), Catch::Contains("extension of 65536 bytes exceeds 65535"));
}

TEST_CASE("wire: malformed headers name the field", "[rpc][wire]") {
  const WireLimits limits;
  auto with = [](auto edit) {
    auto bytes = sample_frame();
    edit(bytes);
    return bytes;
  };
  auto header_error = [&](const std::vector<uint8_t>& bytes, const WireLimits& l) {
    return wire_error([&] { decode_header(bytes, l); });
  };
  CHECK_THAT(header_error(with([](auto& b) { b.resize(20); }), limits), Catch::Contains("header truncated"));
  CHECK_THAT(header_error(with([](auto& b) { put<uint32_t>(b, 0, 0x12345678); }), limits), Catch::Contains("bad magic"));
  CHECK_THAT(header_error(with([](auto& b) { put<uint8_t>(b, 4, 1); }), limits), Catch::Contains("format version 1"));
  CHECK_THAT(header_error(with([](auto& b) { put<uint8_t>(b, 5, 0); }), limits), Catch::Contains("message type 0"));
  CHECK_THAT(header_error(with([](auto& b) { put<uint8_t>(b, 5, 11); }), limits), Catch::Contains("message type 11"));

  const auto frame = sample_frame();
  CHECK_THAT(header_error(frame, WireLimits{.max_payload_bytes = 1u << 20, .max_meta_bytes = 64, .max_table_bytes = 16}),
             Catch::Contains("tensor table of 20 bytes exceeds the limit of 16"));
  CHECK_THAT(header_error(frame, WireLimits{.max_payload_bytes = 1u << 20, .max_meta_bytes = 4, .max_table_bytes = 64}),
             Catch::Contains("meta of 5 bytes exceeds the limit of 4"));
  CHECK_THAT(header_error(frame, WireLimits{.max_payload_bytes = 8, .max_meta_bytes = 64, .max_table_bytes = 64}),
             Catch::Contains("tensor payload of 24 bytes exceeds the limit of 8"));
  // A length far beyond any limit is refused from the header alone (nothing is allocated).
  CHECK_THAT(header_error(with([](auto& b) { put<uint64_t>(b, 24, ~uint64_t{0}); }), limits),
             Catch::Contains("tensor payload of 18446744073709551615 bytes exceeds"));
}

TEST_CASE("wire: malformed tensor tables name the field", "[rpc][wire]") {
  // Decodes the body of `bytes` as is (the header's lengths must still pass the limits).
  auto body_error = [](const std::vector<uint8_t>& bytes) {
    return wire_error([&] {
      const FrameHeader h = decode_header(bytes, WireLimits{});
      const size_t n = std::min(bytes.size() - kFrameHeaderBytes, h.body_bytes());
      decode_body(h, std::span<const uint8_t>(bytes).subspan(kFrameHeaderBytes, n));
    });
  };
  auto with = [](auto edit) {
    auto bytes = sample_frame();
    edit(bytes);
    return bytes;
  };
  // Table layout of the sample: dtype, ndim, flags, reserved, then 2 int64 sizes.
  CHECK_THAT(body_error(with([](auto& b) { b.resize(b.size() - 30); })), Catch::Contains("body is"));
  CHECK_THAT(body_error(with([](auto& b) { put<uint8_t>(b, kTableAt, 200); })), Catch::Contains("unknown dtype 200"));
  CHECK_THAT(body_error(with([](auto& b) { put<uint8_t>(b, kTableAt + 1, 65); })), Catch::Contains("65 dims"));
  CHECK_THAT(body_error(with([](auto& b) { put<uint8_t>(b, kTableAt + 2, 2); })), Catch::Contains("unknown flags"));
  CHECK_THAT(body_error(with([](auto& b) { put<uint8_t>(b, kTableAt + 3, 1); })), Catch::Contains("unknown flags"));
  CHECK_THAT(body_error(with([](auto& b) { put<int64_t>(b, kTableAt + 4, -2); })), Catch::Contains("negative size -2"));
  // ndim 3 claims 24 bytes of sizes where the table has 16 left.
  CHECK_THAT(body_error(with([](auto& b) { put<uint8_t>(b, kTableAt + 1, 3); })), Catch::Contains("sizes truncated"));
  // A table 2 bytes longer than its entries (meta shifts into the table): a truncated entry.
  CHECK_THAT(body_error(with([](auto& b) { put<uint32_t>(b, 16, 22); put<uint32_t>(b, 20, 3); })),
             Catch::Contains("table entry 1 truncated"));
  // Sizes asking for more bytes than the payload holds, and fewer.
  CHECK_THAT(body_error(with([](auto& b) { put<int64_t>(b, kTableAt + 4, 1000); })),
             Catch::Contains("needs more bytes than the payload length"));
  CHECK_THAT(body_error(with([](auto& b) { put<int64_t>(b, kTableAt + 4, 1); })),
             Catch::Contains("tensors need 12 payload bytes, header says 24"));
  // Overflowing size products are caught too.
  CHECK_THAT(body_error(with([](auto& b) {
               put<int64_t>(b, kTableAt + 4, int64_t{1} << 40);
               put<int64_t>(b, kTableAt + 12, int64_t{1} << 40);
             })),
             Catch::Contains("needs more bytes"));
}

TEST_CASE("wire: messages that cannot be framed are refused", "[rpc][wire]") {
  std::vector<uint8_t> out;
  Message msg;
  msg.tensors = {arange(6, DType::Float32).view({2, 3}).transpose(0, 1)};
  CHECK_THAT(wire_error([&] { frame_prefix(msg, out); }), Catch::Contains("contiguous"));
  msg.tensors = {arange(6, DType::Float32)};
  msg.requires_grad = {1, 0};
  CHECK_THAT(wire_error([&] { frame_prefix(msg, out); }), Catch::Contains("2 requires_grad flags for 1 tensors"));
  msg.requires_grad.clear();
  msg.tensors = {Tensor()};
  CHECK_THAT(wire_error([&] { frame_prefix(msg, out); }), Catch::Contains("undefined"));
}
