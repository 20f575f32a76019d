#include "store/store.h"

#include <fmt/format.h>

#include "base/check.h"
#include "base/logging.h"

namespace braid::store {

Bytes to_bytes(std::string_view s) { return Bytes(s.begin(), s.end()); }
std::string to_string(const Bytes& b) { return std::string(b.begin(), b.end()); }

std::vector<Bytes> Store::multi_get(const std::vector<std::string>& keys, Millis timeout) {
  wait(keys, timeout);
  std::vector<Bytes> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(get(k, timeout));
  return out;
}

void Store::multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  BRAID_CHECK_EQ(keys.size(), values.size(), "multi_set: keys and values differ in length");
  for (size_t i = 0; i < keys.size(); ++i) set(keys[i], values[i]);
}

void throw_wait_timeout(std::string_view store, const std::vector<std::string>& keys,
                        const std::vector<std::string>& missing, Millis timeout) {
  logging::dump_backtrace();
  BRAID_THROW(TimeoutError, "{}: wait timed out after {} ms waiting for keys [{}] (missing: [{}])", store,
              timeout.count(), fmt::join(keys, ", "), fmt::join(missing, ", "));
}

int64_t parse_counter(const std::string& key, const Bytes& value) {
  const std::string s = to_string(value);
  int64_t v = 0;
  size_t used = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  BRAID_CHECK_ARG(used == s.size() && !s.empty(), "add: key '{}' holds '{}', which is not an integer counter", key,
                  s);
  return v;
}

}  // namespace braid::store
