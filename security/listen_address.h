// Where braid's servers listen (docs/SECURITY.md, "Exposure"): never on every interface unless asked.
//
//   BRAID_BIND_ANY=1      every interface (0.0.0.0), for a network the operator trusts
//   BRAID_SOCKET_IFNAME   that interface's IPv4 address (the interface the job's hosts share)
//   otherwise             the caller's default: loopback for a single-host job, the rendezvous host's own
//                         address for a job across hosts
#pragma once

#include <string>
#include <string_view>

namespace braid::security {

// Whether BRAID_BIND_ANY asks for every interface.
bool bind_any_requested();
// The host a server binds: "0.0.0.0" under BRAID_BIND_ANY, BRAID_SOCKET_IFNAME's address, else `fallback`.
std::string listen_host(std::string_view fallback);
// The IPv4 address of network interface `name` ("127.0.0.1" for "lo"). Throws InvalidArgument naming
// `variable` and listing the interfaces that have one when it does not exist or has no IPv4 address.
std::string interface_ipv4(const std::string& name, const std::string& variable);

}  // namespace braid::security
