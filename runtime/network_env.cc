#include "runtime/network_env.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>

#include "base/check.h"
#include "base/env.h"

namespace braid::runtime {
namespace {

std::vector<std::string> split_commas(const std::string& text, const char* variable) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t end = std::min(text.find(',', start), text.size());
    out.push_back(text.substr(start, end - start));
    BRAID_CHECK_ARG(!out.back().empty(), "{}='{}': an empty interface name", variable, text);
    if (end == text.size()) return out;
    start = end + 1;
  }
}

}  // namespace

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

NetworkChoice network_from_env() {
  NetworkChoice choice;
  if (const auto iface = env::get("BRAID_SOCKET_IFNAME"); iface && !iface->empty()) {
    BRAID_CHECK_ARG(iface->find(',') == std::string::npos,
                    "BRAID_SOCKET_IFNAME='{}': one interface only (GLOO_SOCKET_IFNAME takes a list for gloo)", *iface);
    choice.rpc_bind_host = interface_ipv4(*iface, "BRAID_SOCKET_IFNAME");
    choice.gloo_devices = {*iface};
  }
  if (const auto list = env::get("GLOO_SOCKET_IFNAME"); list && !list->empty()) {
    choice.gloo_devices = split_commas(*list, "GLOO_SOCKET_IFNAME");
    for (const std::string& device : choice.gloo_devices) interface_ipv4(device, "GLOO_SOCKET_IFNAME");
  }
  return choice;
}

}  // namespace braid::runtime
