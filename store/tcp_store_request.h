// The TCPStore server's request decoding (store/tcp_protocol.h), apart from its sockets and its map, so that
// a request body can be checked on its own: by the unit tests and by the fuzz target fuzz/fuzz_store_frames.cc.
//
// Each command's fields, in order (after the command byte):
//   Set         str key, bytes value          Get, Delete   str key
//   Add         str key, i64 delta            CompareSet    str key, bytes expected, bytes desired
//   Check, Wait, MultiGet   strs keys         NumKeys       nothing
//   MultiSet    u32 count, then count times (str key, bytes value)
// A body is well formed only when every field is present and nothing follows the last one.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store/tcp_protocol.h"

namespace braid::store::wire {

struct Request {
  Command command = Command::NumKeys;
  std::string key;                                  // Set, Get, Add, CompareSet, Delete
  Bytes value;                                      // Set's value; CompareSet's desired value
  Bytes expected;                                   // CompareSet
  int64_t delta = 0;                                // Add
  std::vector<std::string> keys;                    // Check, Wait, MultiGet
  std::vector<std::pair<std::string, Bytes>> pairs;  // MultiSet
};

// The request in `body`, or nullopt with `error` saying what is wrong (the command, by name when known,
// and the field that is missing or malformed, or the trailing bytes).
std::optional<Request> decode_request(const Bytes& body, std::string& error);

// The body decode_request() reads back as `request`.
Bytes encode_request(const Request& request);

// A response body with status 1 and `message`.
Bytes error_response(const std::string& message);

// "set", "multi_get", ...; "command <n>" for a byte that names no command.
std::string command_name(uint8_t command);

}  // namespace braid::store::wire
