// A namespace over another store: every key is stored as "<prefix>/<key>". Groups and subsystems share
// one underlying store through prefixes so that their keys never collide.
#pragma once

#include <memory>

#include "store/store.h"

namespace braid::store {

class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  // The number of keys in the underlying store (all prefixes), as torch's PrefixStore.
  int64_t num_keys() override;
  std::vector<Bytes> multi_get(const std::vector<std::string>& keys, Millis timeout) override;
  void multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;
  using Store::get;
  using Store::multi_get;
  using Store::set;
  using Store::wait;

  std::string server_host() const override { return base_->server_host(); }

  const std::shared_ptr<Store>& base() const { return base_; }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string join(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> join(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> base_;
};

}  // namespace braid::store
