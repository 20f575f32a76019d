#include "collectives/gloo/gloo_devices.h"

#include <gloo/transport/tcp/device.h>
#include <sched.h>

#include <unistd.h>

#include <exception>
#include <map>
#include <set>
#include <mutex>
#include <thread>

#include "base/check.h"
#include "base/env.h"
#include "base/logging.h"
#include "security/listen_address.h"
#include "store/store.h"

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

// gloo's loop thread spins whenever it cannot handle an event at once: `Pair::handleEvents` only
// try-locks the pair and returns when a worker holds the lock, and data for an old-style buffer that is
// not registered yet is left unread; epoll is level-triggered, so `epoll_wait` returns at once, again
// and again. Under the default policy the loop's wake-up preempts the very worker it then waits for, and
// on a rank that has one core (mpirun binds each rank to one) the worker only gets the core back when the
// spinner's time slice ends: a 4 KiB allreduce took 2.3 ms through a braid group and 3.7 ms through raw
// gloo (mpirun -np 2, 2-core VM, Linux 6.18). A SCHED_BATCH thread never preempts on wake-up: the loop
// runs when the worker blocks or at the next tick, finds the lock free and does its work. Same op: 0.11
// and 0.13 ms. The thread is created by gloo's device constructor and inherits the policy of the thread
// that constructs it, so the device is made on a short-lived thread that switched itself to SCHED_BATCH
// (best effort: the policy is a hint, and BRAID_GLOO_LOOP_BATCH=0 keeps the caller's).
std::shared_ptr<::gloo::transport::Device> create_device_with_batch_loop(const std::string& interface) {
  if (!env::get_bool("BRAID_GLOO_LOOP_BATCH", true)) return create_device(interface);
  std::shared_ptr<::gloo::transport::Device> device;
  std::exception_ptr error;
  std::thread maker([&] {
    sched_param param{};
    param.sched_priority = 0;
    (void)::sched_setscheduler(0, SCHED_BATCH, &param);
    try {
      device = create_device(interface);
    } catch (...) {
      error = std::current_exception();
    }
  });
  maker.join();
  if (error) std::rethrow_exception(error);
  return device;
}

std::string this_host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// Every rank publishes its host name in the group's store; one host: "lo", several: the interface of
// this host's name's address.
std::string interface_from_host_names(store::Store& store, const std::string& what, int rank, int size,
                                      std::chrono::milliseconds timeout) {
  const std::string me = this_host_name();
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(fmt::format("gloo/host/{}", r));
  store.set(keys[static_cast<size_t>(rank)], store::to_bytes(me));
  std::set<std::string> hosts;
  for (const auto& v : store.multi_get(keys, timeout)) hosts.insert(store::to_string(v));
  if (hosts.size() == 1) return "lo";
  std::string names;
  for (const auto& h : hosts) names += (names.empty() ? "" : ", ") + h;
  const std::string iface = security::interface_toward(me, what);
  if (iface == "lo") {
    BRAID_THROW(CommError,
                "{}: the ranks span hosts ({}) and this host's name '{}' resolves only to loopback; set "
                "GLOO_SOCKET_IFNAME or BRAID_SOCKET_IFNAME to the interface the hosts share",
                what, names, me);
  }
  logging::get("braid.coll")->debug("{}: the ranks span hosts ({}): interface {}, of the host name {}", what, names,
                                    iface, me);
  return iface;
}

}  // namespace

std::string default_interface(store::Store* store, const std::string& group, int rank, int size,
                              std::chrono::milliseconds timeout) {
  if (const auto iface = env::get("BRAID_SOCKET_IFNAME"); iface && !iface->empty()) return *iface;
  if (store == nullptr || size == 1) return "lo";
  const std::string what = fmt::format("gloo: choosing the network interface of group '{}' (rank {}/{})", group,
                                       rank, size);
  const std::string server = store->server_host();
  if (server.empty()) return interface_from_host_names(*store, what, rank, size, timeout);
  const std::string iface = security::interface_toward(server, what);
  logging::get("braid.coll")->debug("gloo: group '{}' uses interface {}, the one toward the store's host {}",
                                    group, iface, server);
  return iface;
}

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
      device = create_device_with_batch_loop(name);
      c.devices[key] = device;
    }
    out.push_back(std::move(device));
  }
  return out;
}

}  // namespace braid::collectives::gloo
