// The TCPStore wire protocol (docs/WIRE.md, "Store protocol").
//
// Request:  u32 magic "BRST" | u32 body length | body = u8 command, then fields
// Response: u32 body length  | body = u8 status (0 ok, 1 error), then fields (error: one string)
// Fields are strings/byte strings (u32 length + bytes), string lists (u32 count + strings) and i64.
// Integers are little-endian. Bodies longer than kMaxBody are refused: the server closes the connection
// and logs why; a client reports a CommError.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "store/store.h"

namespace braid::store::wire {

inline constexpr uint32_t kMagic = 0x54535242;  // "BRST"
inline constexpr uint32_t kMaxBody = 1u << 30;

enum class Command : uint8_t { Set = 1, Get, Add, CompareSet, Check, Delete, NumKeys, Wait, MultiGet, MultiSet };

class Writer {
 public:
  void u8(uint8_t v) { buf_.push_back(v); }
  void i64(int64_t v) { raw(&v, sizeof(v)); }
  void u32(uint32_t v) { raw(&v, sizeof(v)); }
  void bytes(const Bytes& b) { u32(static_cast<uint32_t>(b.size())); buf_.insert(buf_.end(), b.begin(), b.end()); }
  void str(const std::string& s) { u32(static_cast<uint32_t>(s.size())); raw(s.data(), s.size()); }
  void strs(const std::vector<std::string>& v) { u32(static_cast<uint32_t>(v.size())); for (auto& s : v) str(s); }
  Bytes& buffer() { return buf_; }

 private:
  void raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), c, c + n);
  }
  Bytes buf_;
};

// Reads fields from a body; every read checks the remaining length (nullopt on a short body).
class Reader {
 public:
  explicit Reader(const Bytes& body) : body_(body) {}
  std::optional<uint8_t> u8() { uint8_t v; if (!raw(&v, 1)) return std::nullopt; return v; }
  std::optional<int64_t> i64() { int64_t v; if (!raw(&v, 8)) return std::nullopt; return v; }
  std::optional<uint32_t> u32() { uint32_t v; if (!raw(&v, 4)) return std::nullopt; return v; }
  std::optional<Bytes> bytes() {
    auto n = u32();
    if (!n || *n > body_.size() - pos_) return std::nullopt;
    Bytes b(body_.begin() + static_cast<std::ptrdiff_t>(pos_), body_.begin() + static_cast<std::ptrdiff_t>(pos_ + *n));
    pos_ += *n;
    return b;
  }
  std::optional<std::string> str() {
    auto b = bytes();
    if (!b) return std::nullopt;
    return std::string(b->begin(), b->end());
  }
  std::optional<std::vector<std::string>> strs() {
    auto n = u32();
    if (!n || *n > body_.size()) return std::nullopt;  // each string needs >= 4 bytes; cheap sanity bound
    std::vector<std::string> out;
    for (uint32_t i = 0; i < *n; ++i) {
      auto s = str();
      if (!s) return std::nullopt;
      out.push_back(std::move(*s));
    }
    return out;
  }
  bool done() const { return pos_ == body_.size(); }

 private:
  bool raw(void* p, size_t n) {
    if (n > body_.size() - pos_) return false;
    std::memcpy(p, body_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  const Bytes& body_;
  size_t pos_ = 0;
};

}  // namespace braid::store::wire
