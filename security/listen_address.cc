#include "security/listen_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

namespace {

// The first IPv4 address of `host`; throws CommError naming it and `what`.
in_addr resolve_ipv4(const std::string& host, const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0 || found == nullptr) {
    BRAID_THROW(CommError, "{}: cannot resolve '{}' to an IPv4 address: {}", what, host,
                rc != 0 ? ::gai_strerror(rc) : "no address");
  }
  const std::unique_ptr<addrinfo, void (*)(addrinfo*)> owner(found, ::freeaddrinfo);
  return reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr;
}

}  // namespace

std::string interface_toward(const std::string& host, const std::string& what) {
  const in_addr peer = resolve_ipv4(host, what);
  if ((ntohl(peer.s_addr) >> 24) == 127) return "lo";
  struct Socket {
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ~Socket() {
      if (fd >= 0) ::close(fd);
    }
  } udp;
  if (udp.fd < 0) {
    BRAID_THROW(CommError, "{}: socket() to find the route to '{}': {}", what, host, std::strerror(errno));
  }
  const int fd = udp.fd;
  // connect() on a UDP socket only picks the route and the source address; no packet leaves.
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr = peer;
  to.sin_port = htons(9);  // any port: nothing is sent
  sockaddr_in from{};
  socklen_t from_len = sizeof(from);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&from), &from_len) != 0) {
    BRAID_THROW(CommError, "{}: no route from this host to '{}': {}", what, host, std::strerror(errno));
  }
  if ((ntohl(from.sin_addr.s_addr) >> 24) == 127) return "lo";
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) BRAID_THROW(CommError, "{}: getifaddrs failed: {}", what, std::strerror(errno));
  const std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> owner(list, ::freeifaddrs);
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if (reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr == from.sin_addr.s_addr) return a->ifa_name;
  }
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &from.sin_addr, text, sizeof(text));
  BRAID_THROW(CommError, "{}: the route to '{}' leaves from {}, which no interface of this host holds", what, host,
              text);
}

}  // namespace braid::security
