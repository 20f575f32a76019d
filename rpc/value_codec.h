// The byte encoding of Values inside a message's meta (docs/RPC.md "Value encoding").
//
// A value is a kind byte followed by its data: bool u8; int i64; double f64; string u32 length + bytes;
// tensor u32 index into the message's tensor list (0xffffffff: undefined); sparse tensor u8 ndim, ndim
// i64 sizes, u8 coalesced, u32 indices index, u32 values index; list/tuple u32 count + items; dict u32
// count + (string key, value) pairs; rref its fork data (rpc/rref_context.h). Tensor bytes never enter the
// meta: they travel in the frame's payload (rpc/wire.h). Objects are sent as their to_value() form.
//
// Decoding checks every length and count against the bytes left, nesting against kMaxValueDepth, and
// tensor indices against the message's tensors; a violation throws WireError naming what is wrong.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "rpc/message.h"
#include "rpc/value.h"
#include "rpc/wire.h"

namespace braid::rpc {

inline constexpr int kMaxValueDepth = 100;

// What an RRef becomes on the wire: enough for the receiver to build its own user (or find the owner's).
struct RRefForkData {
  int32_t owner = -1;
  RRefId rref_id;
  ForkId fork_id;
  int32_t parent = -1;  // the worker that sent this fork (it waits for the child's accept)
};

// Appends little-endian primitives to a meta buffer.
class MetaWriter {
 public:
  explicit MetaWriter(std::vector<uint8_t>& out) : out_(out) {}
  void u8(uint8_t v) { raw(&v, 1); }
  void u32(uint32_t v) { raw(&v, 4); }
  void i32(int32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void str(const std::string& s);
  void id(const GloballyUniqueId& g) {
    i32(g.creator);
    u64(g.local_id);
  }

 private:
  void raw(const void* p, size_t n);
  std::vector<uint8_t>& out_;
};

// Reads what MetaWriter wrote; every read checks the bytes left (WireError "meta truncated reading <what>").
class MetaReader {
 public:
  explicit MetaReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  uint8_t u8(const char* what);
  uint32_t u32(const char* what);
  int32_t i32(const char* what);
  uint64_t u64(const char* what);
  int64_t i64(const char* what);
  double f64(const char* what);
  std::string str(const char* what);
  GloballyUniqueId id(const char* what);
  size_t left() const { return bytes_.size() - at_; }
  // WireError unless every byte was read.
  void expect_end(const char* what) const;

 private:
  void raw(void* p, size_t n, const char* what);
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

// Turns an RRef into fork data as it is sent (the agent forks it: rref_context.h).
using RRefEncoder = std::function<RRefForkData(const RRef&)>;
// Turns received fork data into an RRef handle on this worker.
using RRefDecoder = std::function<RRef(const RRefForkData&)>;

// Appends `value` to `meta`; its tensors (made contiguous CPU tensors) are appended to `msg_tensors`,
// and, when `sources` is given, the value's own tensor each was made from to `sources` (undefined for the
// parts of a sparse tensor). An RRef without an encoder throws InvalidArgument.
void encode_value(const Value& value, MetaWriter& meta, std::vector<Tensor>& msg_tensors, const RRefEncoder* rrefs,
                  std::vector<Tensor>* sources = nullptr);
Value decode_value(MetaReader& meta, const std::vector<Tensor>& msg_tensors, const RRefDecoder* rrefs);

// Args are a list of positional values and a dict of keyword values.
void encode_args(const Args& args, MetaWriter& meta, std::vector<Tensor>& msg_tensors, const RRefEncoder* rrefs,
                 std::vector<Tensor>* sources = nullptr);
Args decode_args(MetaReader& meta, const std::vector<Tensor>& msg_tensors, const RRefDecoder* rrefs);

}  // namespace braid::rpc
