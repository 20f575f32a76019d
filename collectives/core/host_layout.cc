#include "collectives/core/host_layout.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/env.h"

namespace braid::collectives {

std::string host_identity() {
  if (const auto v = env::get("BRAID_EMULATED_HOST"); v && !v->empty()) return "emulated/" + *v;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return std::string(host) + "/" + boot;
}

HostLayout HostLayout::from_identities(const std::vector<std::string>& identities) {
  HostLayout l;
  for (const auto& id : identities) {
    const auto it = std::find(l.names.begin(), l.names.end(), id);
    const int host = static_cast<int>(it - l.names.begin());
    if (it == l.names.end()) {
      l.names.push_back(id);
      l.hosts.emplace_back();
    }
    auto& ranks = l.hosts[static_cast<size_t>(host)];
    l.local_rank_of.push_back(static_cast<int>(ranks.size()));
    ranks.push_back(static_cast<int>(l.host_of.size()));
    l.host_of.push_back(host);
  }
  return l;
}

HostLayout HostLayout::exchange(store::Store& store, const std::string& prefix, int rank, int size, Millis timeout) {
  const int64_t gen = (store.add(prefix + "generation", 1) - 1) / size;
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(fmt::format("{}{}/host/{}", prefix, gen, r));
  store.set(keys[static_cast<size_t>(rank)], store::to_bytes(host_identity()));
  std::vector<std::string> ids;
  for (const auto& v : store.multi_get(keys, timeout)) ids.push_back(store::to_string(v));
  return from_identities(ids);
}

int HostLayout::max_local_size() const {
  size_t most = 0;
  for (const auto& h : hosts) most = std::max(most, h.size());
  return static_cast<int>(most);
}

bool HostLayout::uniform() const {
  for (const auto& h : hosts) {
    if (h.size() != hosts.front().size()) return false;
  }
  return true;
}

std::vector<int> HostLayout::ranks_with_local_rank(int local) const {
  std::vector<int> ranks;
  for (const auto& h : hosts) {
    if (local < static_cast<int>(h.size())) ranks.push_back(h[static_cast<size_t>(local)]);
  }
  return ranks;
}

std::string HostLayout::describe() const {
  std::vector<std::string> parts;
  for (const auto& h : hosts) parts.push_back(fmt::format("{}", fmt::join(h, ",")));
  return fmt::format("{} host{}: {}", hosts.size(), hosts.size() == 1 ? "" : "s", fmt::join(parts, " | "));
}

}  // namespace braid::collectives
