// An in-process Store: a map under a mutex. For tests and for ranks that are threads of one process.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>

#include "store/store.h"

namespace braid::store {

class HashStore final : public Store {
 public:
  explicit HashStore(Millis timeout = kDefaultStoreTimeout) : Store(timeout) {}

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  using Store::get;
  using Store::set;
  using Store::wait;

 private:

  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Bytes> data_;  // GUARDED_BY(mu_)
};

}  // namespace braid::store
