// Message: the unit every RPC transport carries — a type, a request id, the agent's encoded metadata and
// the tensors whose bytes travel beside it (never copied into the metadata).
//
// Transports do not interpret `meta`; the agent does (rpc/agent_protocol.h). On the wire a message is one
// frame (rpc/wire.h).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"

namespace braid::rpc {

enum class MessageType : uint8_t {
  kHello = 1,             // transport-internal: the first frame on a TCP connection names the sender
  kCall = 2,              // run a function (or a method of an RRef's object); reply kResult / kError
  kRemoteCall = 3,        // the same, keeping the result on the callee as an owner RRef; reply kResult
  kResult = 4,            // a successful reply to request `id`
  kError = 5,             // a failed reply to request `id`: the remote error message
  kRRefFetch = 6,         // to_here: reply kResult with a copy of the owner's value
  kRRefForkRequest = 7,   // a new user asks the owner to count its fork; reply kResult
  kRRefChildAccept = 8,   // a new user tells the worker that forked it that the owner counts it now
  kRRefUserDelete = 9,    // a user is gone; the owner drops the fork; reply kResult
  kPing = 10,             // liveness / shutdown drain; reply kResult
};
inline constexpr uint8_t kMinMessageType = 1;
inline constexpr uint8_t kMaxMessageType = 10;

std::string_view message_type_name(MessageType type);
// Whether `type` is a reply (kResult, kError) rather than a request.
inline bool is_reply(MessageType type) { return type == MessageType::kResult || type == MessageType::kError; }

struct Message {
  MessageType type = MessageType::kCall;
  uint64_t id = 0;
  std::vector<uint8_t> meta;
  // Contiguous CPU tensors (the sender makes them so); their bytes follow the metadata on the wire.
  std::vector<Tensor> tensors;
  // Per tensor, whether it required grad on the sender (distributed autograd reads it).
  std::vector<uint8_t> requires_grad;
  // Bytes a layer above RPC attaches to calls and replies (rpc/call_hooks.h: distributed autograd's
  // context and message ids); empty for most messages. At most 65535 bytes (a u16 on the wire).
  std::vector<uint8_t> ext;
  // Sender side only, never on the wire: per tensor, the caller's tensor it was made from when encoding
  // had to copy it (contiguous()), else undefined. Call hooks look at these for autograd state.
  std::vector<Tensor> sources;
};

}  // namespace braid::rpc
