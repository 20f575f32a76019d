#include "store/hash_store.h"

#include "base/check.h"

namespace braid::store {

void HashStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    data_[key] = value;
  }
  changed_.notify_all();
}

Bytes HashStore::get(const std::string& key, Millis timeout) {
  wait({key}, timeout);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = data_.find(key);
  BRAID_CHECK_ARG(it != data_.end(), "HashStore get: key '{}' was deleted while being read", key);
  return it->second;
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  int64_t v = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = data_.find(key);
    if (it != data_.end()) v = parse_counter(key, it->second);
    v += delta;
    data_[key] = to_bytes(std::to_string(v));
  }
  changed_.notify_all();
  return v;
}

Bytes HashStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Bytes result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = data_.find(key);
    if (it == data_.end()) {
      if (!expected.empty()) return expected;
      data_[key] = desired;
      result = desired;
    } else if (it->second == expected) {
      it->second = desired;
      result = desired;
    } else {
      return it->second;
    }
  }
  changed_.notify_all();
  return result;
}

void HashStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool ok = changed_.wait_for(lock, timeout, [&] { return missing_keys(data_, keys).empty(); });
  if (!ok) {
    auto missing = missing_keys(data_, keys);
    lock.unlock();
    throw_wait_timeout("HashStore", keys, missing, timeout);
  }
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  return missing_keys(data_, keys).empty();
}

bool HashStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return data_.erase(key) > 0;
}

int64_t HashStore::num_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(data_.size());
}

}  // namespace braid::store
