// Where braid's servers listen (docs/SECURITY.md, "Exposure"): never on every interface unless asked.
//
//   BRAID_BIND_ANY=1      every interface (0.0.0.0), for a network the operator trusts
//   BRAID_SOCKET_IFNAME   that interface's IPv4 address (the interface the job's hosts share)
//   otherwise             the caller's default: loopback for a single-host job, the rendezvous host's own
//                         address for a job across hosts
//
// A job across hosts need not name its interface: interface_toward(rendezvous host) is the interface whose
// address this host's kernel would use to reach that host, the one the other hosts can reach us on too
// (the engines that listen pick it when nothing is set: gloo's device, collectives/gloo/gloo_devices.h).
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

// The network interface this host would use to reach `host` (an IPv4 address or a host name): the one
// holding the source address of the route to it, found by connecting a UDP socket (nothing is sent).
// "lo" for a loopback address. This host's own address (the rendezvous host asking about itself) gives
// the interface that holds it ("eth0"), not "lo", though the kernel routes it through loopback: the
// rendezvous host must listen where the others reach it. Throws CommError naming `host` and `what` when
// it does not resolve to an IPv4 address or no route leads there.
std::string interface_toward(const std::string& host, const std::string& what);

}  // namespace braid::security
