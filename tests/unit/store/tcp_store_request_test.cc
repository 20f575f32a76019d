// The TCPStore server's request decoding (store/tcp_store_request.h): each command round-trips, and every
// malformed body is refused with a message that names the command and what is wrong.
#include <catch2/catch.hpp>

#include "store/tcp_store_request.h"

namespace braid::store::wire {
namespace {

Request multi_set_request() {
  Request r;
  r.command = Command::MultiSet;
  r.pairs = {{"a", to_bytes("1")}, {"b", {}}};
  return r;
}

TEST_CASE("TCPStore requests: every command decodes back to what was encoded", "[store]") {
  Request set;
  set.command = Command::Set;
  set.key = "rank/0";
  set.value = to_bytes("127.0.0.1:1234");
  std::string error;
  auto back = decode_request(encode_request(set), error);
  REQUIRE(back);
  CHECK(back->command == Command::Set);
  CHECK(back->key == "rank/0");
  CHECK(back->value == set.value);

  Request add;
  add.command = Command::Add;
  add.key = "n";
  add.delta = -3;
  back = decode_request(encode_request(add), error);
  REQUIRE(back);
  CHECK(back->delta == -3);

  Request wait;
  wait.command = Command::Wait;
  wait.keys = {"x", "", "y"};
  back = decode_request(encode_request(wait), error);
  REQUIRE(back);
  CHECK(back->keys == wait.keys);

  back = decode_request(encode_request(multi_set_request()), error);
  REQUIRE(back);
  REQUIRE(back->pairs.size() == 2);
  CHECK(back->pairs[0].first == "a");
  CHECK(back->pairs[1].second.empty());
}

TEST_CASE("TCPStore requests: malformed bodies are refused, naming the command and the field", "[store]") {
  std::string error;
  CHECK_FALSE(decode_request({}, error));
  CHECK(error == "malformed request: empty body");

  CHECK_FALSE(decode_request({0}, error));
  CHECK(error == "malformed request: unknown command 0");
  CHECK_FALSE(decode_request({11}, error));
  CHECK(error == "malformed request: unknown command 11");

  // A key that claims more bytes than the body holds.
  Bytes body{static_cast<uint8_t>(Command::Get), 0xff, 0xff, 0xff, 0x7f, 'k'};
  CHECK_FALSE(decode_request(body, error));
  CHECK(error == "malformed get request: key missing or truncated (6-byte body)");

  // A multi_set whose count promises more pairs than follow: refused without allocating for the count.
  Bytes ms = encode_request(multi_set_request());
  ms[1] = 0xff;
  ms[2] = 0xff;
  ms[3] = 0xff;
  ms[4] = 0xff;
  CHECK_FALSE(decode_request(ms, error));
  CHECK(error.find("malformed multi_set request: key missing") == 0);

  Bytes trailing = encode_request(multi_set_request());
  trailing.push_back(0);
  CHECK_FALSE(decode_request(trailing, error));
  CHECK(error.find("malformed multi_set request: trailing bytes") == 0);

  CHECK(command_name(200) == "command 200");
}

TEST_CASE("TCPStore requests: an error response carries status 1 and the message", "[store]") {
  const Bytes body = error_response("no");
  Reader r(body);
  CHECK(r.u8() == std::optional<uint8_t>(1));
  CHECK(r.str() == std::optional<std::string>("no"));
  CHECK(r.done());
}

}  // namespace
}  // namespace braid::store::wire
