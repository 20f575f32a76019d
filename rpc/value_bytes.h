// One Value as a self-contained byte string, for carrying values outside an RPC message (the object
// collectives of objects/). The bytes are one wire frame (rpc/wire.h): its meta is the value's encoding
// (rpc/value_codec.h) and its payload the value's tensors, so parsing them takes the same checked path as
// a received message: every length against the limits and the bytes present before anything is
// allocated, every tensor index against the table, nesting against kMaxValueDepth. RRefs cannot travel
// this way (they need an agent to fork them): InvalidArgument.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rpc/value.h"
#include "rpc/wire.h"

namespace braid::rpc {

std::vector<uint8_t> value_to_bytes(const Value& value);
// WireError naming the field for anything value_to_bytes could not have written.
Value value_from_bytes(std::span<const uint8_t> bytes, const WireLimits& limits = {});

}  // namespace braid::rpc
