// Which network a job's ranks talk over, chosen in the environment (docs/DEPLOY.md, "Choosing the network").
// Unset, gloo and RPC over TCP take the interface toward the store's host by themselves (loopback on one
// host); these variables are for when that route is not the network the job should use.
//
//   BRAID_SOCKET_IFNAME  one interface, e.g. "eth1": the gloo groups' TCP device, and the address the RPC
//                        tcp transport listens on (the interface's IPv4 address)
//   GLOO_SOCKET_IFNAME   gloo's devices only, comma-separated (PyTorch's variable); wins for gloo
//
// NCCL and UCX read their own variables (NCCL_SOCKET_IFNAME, UCX_NET_DEVICES) and Open MPI its MCA
// parameters (btl_tcp_if_include); braid passes those through untouched.
#pragma once

#include <string>
#include <vector>

namespace braid::runtime {

struct NetworkChoice {
  std::vector<std::string> gloo_devices;  // empty: gloo's default, toward the store's host (GroupOptions::devices)
  std::string rpc_bind_host;              // empty: init_rpc's default, toward the store's host (rpc/api.h)
};

// Reads the variables above. Throws InvalidArgument naming the variable and the interface when the
// interface does not exist or has no IPv4 address (the message lists the interfaces that do).
NetworkChoice network_from_env();

// The IPv4 address of network interface `name` ("127.0.0.1" for "lo"). Throws InvalidArgument as above;
// `variable` names where the name came from.
std::string interface_ipv4(const std::string& name, const std::string& variable);

}  // namespace braid::runtime
