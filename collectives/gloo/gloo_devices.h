// Gloo TCP devices by network interface name. A device owns a listening address and gloo's epoll loop
// thread, and serves any number of contexts, so devices are shared process-wide: every group (and
// every lane of every group) on interface "lo" uses the same device instead of starting a loop thread
// each. A list that names an interface twice ({"lo", "lo"}: torch's multi-device test) gets two distinct
// devices, the k-th occurrence always mapping to the same one.
//
// Thread-safety: may be called from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace gloo::transport {
class Device;
}

namespace braid::store {
class Store;
}

namespace braid::collectives::gloo {

// The interface of a group that names none (BackendOptions::devices empty): BRAID_SOCKET_IFNAME when
// set; else the interface toward the host of `store`'s server (security::interface_toward), which is
// "lo" on one host and the network the ranks share across hosts. A store without a server host (file://
// on a shared file system) says nothing about the hosts, so the ranks publish their host names in it:
// "lo" when they all share this one, else the interface of this host's name's address (PyTorch's Gloo
// takes that one always). Throws CommError naming the hosts when that name resolves only to loopback.
std::string default_interface(store::Store* store, const std::string& group, int rank, int size,
                              std::chrono::milliseconds timeout);

// One device per entry of `interfaces` (empty means {"lo"}). Throws InvalidArgument naming the
// interface when gloo cannot use it.
std::vector<std::shared_ptr<::gloo::transport::Device>> tcp_devices(const std::vector<std::string>& interfaces);

}  // namespace braid::collectives::gloo
