#include "store/prefix_store.h"

#include "base/check.h"

namespace braid::store {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : Store(base ? base->timeout() : kDefaultStoreTimeout), prefix_(std::move(prefix)), base_(std::move(base)) {
  BRAID_CHECK_ARG(base_ != nullptr, "PrefixStore '{}': base store is null", prefix_);
}

std::vector<std::string> PrefixStore::join(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(join(k));
  return out;
}

void PrefixStore::set(const std::string& key, const Bytes& value) { base_->set(join(key), value); }
Bytes PrefixStore::get(const std::string& key, Millis timeout) { return base_->get(join(key), timeout); }
int64_t PrefixStore::add(const std::string& key, int64_t delta) { return base_->add(join(key), delta); }
Bytes PrefixStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  return base_->compare_set(join(key), expected, desired);
}
void PrefixStore::wait(const std::vector<std::string>& keys, Millis timeout) { base_->wait(join(keys), timeout); }
bool PrefixStore::check(const std::vector<std::string>& keys) { return base_->check(join(keys)); }
bool PrefixStore::delete_key(const std::string& key) { return base_->delete_key(join(key)); }
int64_t PrefixStore::num_keys() { return base_->num_keys(); }
std::vector<Bytes> PrefixStore::multi_get(const std::vector<std::string>& keys, Millis timeout) {
  return base_->multi_get(join(keys), timeout);
}
void PrefixStore::multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  base_->multi_set(join(keys), values);
}

}  // namespace braid::store
