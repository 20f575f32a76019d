#include "runtime/network_env.h"

#include "base/check.h"
#include "base/env.h"
#include "security/listen_address.h"

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
  return security::interface_ipv4(name, variable);
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
