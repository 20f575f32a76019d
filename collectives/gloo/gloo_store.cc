#include "collectives/gloo/gloo_store.h"

#include <algorithm>

#include "base/check.h"

namespace braid::collectives::gloo {

GlooStore::GlooStore(std::shared_ptr<store::Store> store, std::string prefix, std::chrono::milliseconds timeout)
    : store_(std::move(store)), prefix_(std::move(prefix)), timeout_(timeout) {
  BRAID_CHECK_ARG(store_ != nullptr, "gloo: a store is required to bootstrap the gloo contexts");
}

void GlooStore::set(const std::string& k, const std::vector<char>& data) {
  store_->set(key(k), store::Bytes(data.begin(), data.end()));
}

std::vector<char> GlooStore::get(const std::string& k) {
  const store::Bytes value = store_->get(key(k), timeout_);
  return std::vector<char>(value.begin(), value.end());
}

void GlooStore::wait(const std::vector<std::string>& ks) { store_->wait(keys(ks), timeout_); }

void GlooStore::wait(const std::vector<std::string>& ks, const std::chrono::milliseconds& timeout) {
  // gloo passes its context's pair timeout, or kNoTimeout (zero) for none: the adapter's own timeout (the
  // rendezvous deadline) bounds the wait either way, since a pair timeout may be far longer.
  store_->wait(keys(ks), timeout.count() > 0 ? std::min(timeout, timeout_) : timeout_);
}

std::vector<std::string> GlooStore::keys(const std::vector<std::string>& ks) const {
  std::vector<std::string> out;
  out.reserve(ks.size());
  for (const auto& k : ks) out.push_back(key(k));
  return out;
}

}  // namespace braid::collectives::gloo
