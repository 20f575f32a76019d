#include "collectives/gloo/gloo_devices.h"

#include <gloo/transport/tcp/device.h>

#include <map>
#include <mutex>

#include "base/check.h"

namespace braid::collectives::gloo {

namespace {

struct DeviceCache {
  std::mutex mu;
  // "<interface>#<occurrence>" -> device; weak so that the last group to go also stops the loop thread.
  std::map<std::string, std::weak_ptr<::gloo::transport::Device>> devices;
};

DeviceCache& cache() {
  static DeviceCache c;
  return c;
}

std::shared_ptr<::gloo::transport::Device> create_device(const std::string& interface) {
  ::gloo::transport::tcp::attr attr;
  attr.iface = interface;
  try {
    return ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    BRAID_THROW(InvalidArgument, "gloo: cannot create a TCP device on network interface '{}': {}", interface,
                e.what());
  }
}

}  // namespace

std::vector<std::shared_ptr<::gloo::transport::Device>> tcp_devices(const std::vector<std::string>& interfaces) {
  const std::vector<std::string> names = interfaces.empty() ? std::vector<std::string>{"lo"} : interfaces;
  auto& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  std::map<std::string, int> seen;
  std::vector<std::shared_ptr<::gloo::transport::Device>> out;
  for (const auto& name : names) {
    BRAID_CHECK_ARG(!name.empty(), "gloo: empty network interface name in the device list");
    const std::string key = name + "#" + std::to_string(seen[name]++);
    auto device = c.devices[key].lock();
    if (!device) {
      device = create_device(name);
      c.devices[key] = device;
    }
    out.push_back(std::move(device));
  }
  return out;
}

}  // namespace braid::collectives::gloo
