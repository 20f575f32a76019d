// The key-value Store that every process of a job shares for rendezvous: process groups exchange
// addresses and counters through it, RPC agents publish worker names, barriers count arrivals.
//
// Values are byte strings. Blocking calls (get, wait) take a timeout; when it runs out they throw
// TimeoutError naming the keys still missing and how long they were awaited. A store's default timeout
// applies when none is given.
//
// Implementations: HashStore (one process), FileStore (a file shared by processes), TCPStore (a server in
// one process, clients anywhere), PrefixStore (a namespace over another store).
// Thread-safety: every method of every store may be called from any thread concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace braid::store {

using Bytes = std::vector<uint8_t>;
using Millis = std::chrono::milliseconds;

inline constexpr Millis kDefaultStoreTimeout{300'000};  // 5 minutes, as torch's default store timeout

Bytes to_bytes(std::string_view s);
std::string to_string(const Bytes& b);

class Store {
 public:
  explicit Store(Millis timeout = kDefaultStoreTimeout) : timeout_(timeout) {}
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits until `key` exists (up to `timeout`), then returns its value.
  virtual Bytes get(const std::string& key, Millis timeout) = 0;
  Bytes get(const std::string& key) { return get(key, timeout()); }
  // Adds `delta` to the integer stored at `key` (0 when absent) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Sets `key` to `desired` if its value equals `expected` (or if it is absent and `expected` is empty).
  // Returns the value after the call: `desired` when swapped, else the current value (or `expected`
  // when the key is absent), as torch's compare_set.
  virtual Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  // Waits until every key exists; throws TimeoutError naming the missing keys.
  virtual void wait(const std::vector<std::string>& keys, Millis timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }
  // Whether every key exists now (no waiting).
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Removes `key`; returns whether it existed.
  virtual bool delete_key(const std::string& key) = 0;
  virtual int64_t num_keys() = 0;
  // Several keys at once; the default implementations loop, implementations may batch.
  virtual std::vector<Bytes> multi_get(const std::vector<std::string>& keys, Millis timeout);
  std::vector<Bytes> multi_get(const std::vector<std::string>& keys) { return multi_get(keys, timeout()); }
  virtual void multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values);

  // Convenience for string values.
  void set(const std::string& key, std::string_view value) { set(key, to_bytes(value)); }
  std::string get_string(const std::string& key) { return to_string(get(key)); }

  Millis timeout() const { return timeout_; }
  void set_timeout(Millis timeout) { timeout_ = timeout; }

  // The host whose server this store's clients reach ("node01", "10.0.0.7"), or "" for a store without
  // one (HashStore, FileStore) or listening on every interface. What the ranks of a job across hosts
  // can all reach: an engine that listens itself picks its interface toward it
  // (security::interface_toward).
  virtual std::string server_host() const { return {}; }

 private:
  Millis timeout_;
};

// Throws TimeoutError: "<store>: wait timed out after N ms waiting for keys [a, b] (missing: [b])".
[[noreturn]] void throw_wait_timeout(std::string_view store, const std::vector<std::string>& keys,
                                     const std::vector<std::string>& missing, Millis timeout);

// The keys of `keys` that `data` (a map from key to value) does not hold, in order.
template <class Map>
std::vector<std::string> missing_keys(const Map& data, const std::vector<std::string>& keys) {
  std::vector<std::string> missing;
  for (const auto& k : keys) {
    if (data.find(k) == data.end()) missing.push_back(k);
  }
  return missing;
}

// Parses the decimal counter stored by add(); throws InvalidArgument naming the key for junk.
int64_t parse_counter(const std::string& key, const Bytes& value);

}  // namespace braid::store
