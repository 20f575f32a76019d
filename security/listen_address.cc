#include "security/listen_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>

#include "base/check.h"
#include "base/env.h"

namespace braid::security {

bool bind_any_requested() { return env::get_bool("BRAID_BIND_ANY", false); }

std::string listen_host(std::string_view fallback) {
  if (bind_any_requested()) return "0.0.0.0";
  if (const auto iface = env::get("BRAID_SOCKET_IFNAME"); iface && !iface->empty()) {
    return interface_ipv4(*iface, "BRAID_SOCKET_IFNAME");
  }
  return std::string(fallback);
}

std::string interface_ipv4(const std::string& name, const std::string& variable) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) BRAID_THROW(Error, "{}={}: getifaddrs failed: {}", variable, name, std::strerror(errno));
  const std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> owner(list, ::freeifaddrs);
  std::set<std::string> names;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    names.insert(a->ifa_name);
    if (name != a->ifa_name) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr) return text;
  }
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
  BRAID_THROW(InvalidArgument, "{}={}: no network interface of that name with an IPv4 address (this machine has: {})",
              variable, name, known.empty() ? "none" : known);
}

}  // namespace braid::security
