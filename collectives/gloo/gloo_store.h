// GlooStore: gloo's rendezvous::Store interface over a braid store::Store, so that gloo contexts
// bootstrap through the same store as everything else in the job (TCPStore, FileStore, ...).
//
// Every key is written under `prefix` ("lane0/", "p2p/", ...): gloo's tcp transport names its keys
// after the rank alone ("0", "1", ...), so each context of a group needs its own namespace.
// Blocking calls (get, wait) use the adapter's timeout, or gloo's where that is shorter; a timeout surfaces as
// braid::TimeoutError naming the missing keys (from the braid store), which gloo lets propagate.
//
// Thread-safety: as the underlying braid store (every method may be called concurrently).
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "store/store.h"

namespace braid::collectives::gloo {

class GlooStore final : public ::gloo::rendezvous::Store {
 public:
  GlooStore(std::shared_ptr<store::Store> store, std::string prefix, std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits for the key (up to the adapter's timeout), as gloo's own stores do.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  std::string key(const std::string& k) const { return prefix_ + k; }
  std::vector<std::string> keys(const std::vector<std::string>& ks) const;

  std::shared_ptr<store::Store> store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

}  // namespace braid::collectives::gloo
