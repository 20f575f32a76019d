#include "store/tcp_store_request.h"

#include <fmt/format.h>

namespace braid::store::wire {

namespace {

// Reads one command's fields; the first field that is missing or short is remembered for the message.
class FieldReader {
 public:
  explicit FieldReader(const Bytes& body) : r_(body) {}

  std::optional<uint8_t> command() { return r_.u8(); }
  bool str(std::string& out, const char* what) { return take(r_.str(), out, what); }
  bool bytes(Bytes& out, const char* what) { return take(r_.bytes(), out, what); }
  bool i64(int64_t& out, const char* what) { return take(r_.i64(), out, what); }
  bool u32(uint32_t& out, const char* what) { return take(r_.u32(), out, what); }
  bool strs(std::vector<std::string>& out, const char* what) { return take(r_.strs(), out, what); }
  bool done() const { return r_.done(); }
  const char* missing() const { return missing_; }

 private:
  template <class T>
  bool take(std::optional<T> v, T& out, const char* what) {
    if (!v) {
      missing_ = what;
      return false;
    }
    out = std::move(*v);
    return true;
  }

  Reader r_;
  const char* missing_ = nullptr;
};

bool decode_fields(FieldReader& f, Request& req) {
  switch (req.command) {
    case Command::Set: return f.str(req.key, "key") && f.bytes(req.value, "value");
    case Command::Get:
    case Command::Delete: return f.str(req.key, "key");
    case Command::Add: return f.str(req.key, "key") && f.i64(req.delta, "delta");
    case Command::CompareSet:
      return f.str(req.key, "key") && f.bytes(req.expected, "expected value") && f.bytes(req.value, "desired value");
    case Command::Check:
    case Command::Wait:
    case Command::MultiGet: return f.strs(req.keys, "key list");
    case Command::NumKeys: return true;
    case Command::MultiSet: {
      uint32_t n = 0;
      if (!f.u32(n, "pair count")) return false;
      // No reserve(n): the count is the sender's word; each pair read below is checked against the body.
      for (uint32_t i = 0; i < n; ++i) {
        std::pair<std::string, Bytes> kv;
        if (!f.str(kv.first, "key") || !f.bytes(kv.second, "value")) return false;
        req.pairs.push_back(std::move(kv));
      }
      return true;
    }
  }
  return false;
}

}  // namespace

std::string command_name(uint8_t command) {
  switch (static_cast<Command>(command)) {
    case Command::Set: return "set";
    case Command::Get: return "get";
    case Command::Add: return "add";
    case Command::CompareSet: return "compare_set";
    case Command::Check: return "check";
    case Command::Delete: return "delete_key";
    case Command::NumKeys: return "num_keys";
    case Command::Wait: return "wait";
    case Command::MultiGet: return "multi_get";
    case Command::MultiSet: return "multi_set";
  }
  return fmt::format("command {}", command);
}

std::optional<Request> decode_request(const Bytes& body, std::string& error) {
  FieldReader f(body);
  const auto cmd = f.command();
  if (!cmd) {
    error = "malformed request: empty body";
    return std::nullopt;
  }
  if (*cmd < static_cast<uint8_t>(Command::Set) || *cmd > static_cast<uint8_t>(Command::MultiSet)) {
    error = fmt::format("malformed request: unknown command {}", *cmd);
    return std::nullopt;
  }
  Request req;
  req.command = static_cast<Command>(*cmd);
  if (!decode_fields(f, req)) {
    error = fmt::format("malformed {} request: {} missing or truncated ({}-byte body)", command_name(*cmd),
                        f.missing() != nullptr ? f.missing() : "a field", body.size());
    return std::nullopt;
  }
  if (!f.done()) {
    error = fmt::format("malformed {} request: trailing bytes after its fields ({}-byte body)", command_name(*cmd),
                        body.size());
    return std::nullopt;
  }
  return req;
}

Bytes encode_request(const Request& req) {
  Writer w;
  w.u8(static_cast<uint8_t>(req.command));
  switch (req.command) {
    case Command::Set: w.str(req.key); w.bytes(req.value); break;
    case Command::Get:
    case Command::Delete: w.str(req.key); break;
    case Command::Add: w.str(req.key); w.i64(req.delta); break;
    case Command::CompareSet: w.str(req.key); w.bytes(req.expected); w.bytes(req.value); break;
    case Command::Check:
    case Command::Wait:
    case Command::MultiGet: w.strs(req.keys); break;
    case Command::NumKeys: break;
    case Command::MultiSet:
      w.u32(static_cast<uint32_t>(req.pairs.size()));
      for (const auto& [k, v] : req.pairs) {
        w.str(k);
        w.bytes(v);
      }
      break;
  }
  return std::move(w.buffer());
}

Bytes error_response(const std::string& message) {
  Writer w;
  w.u8(1);
  w.str(message);
  return std::move(w.buffer());
}

}  // namespace braid::store::wire
