// Gloo TCP devices by network interface name. A device owns a listening address and gloo's epoll loop
// thread, and serves any number of contexts, so devices are shared process-wide: every group (and
// every lane of every group) on interface "lo" uses the same device instead of starting a loop thread
// each. A list that names an interface twice ({"lo", "lo"}: torch's multi-device test) gets two distinct
// devices, the k-th occurrence always mapping to the same one.
//
// Thread-safety: may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace gloo::transport {
class Device;
}

namespace braid::collectives::gloo {

// One device per entry of `interfaces` (empty means {"lo"}). Throws InvalidArgument naming the
// interface when gloo cannot use it.
std::vector<std::shared_ptr<::gloo::transport::Device>> tcp_devices(const std::vector<std::string>& interfaces);

}  // namespace braid::collectives::gloo
