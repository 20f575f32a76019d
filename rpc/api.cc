#include "rpc/api.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "base/check.h"
#include "base/env.h"
#include "base/logging.h"
#include "security/listen_address.h"
#include "store/prefix_store.h"
#include "store/rendezvous.h"

namespace braid::rpc {

namespace {

std::mutex g_mu;
std::condition_variable g_cv;
std::shared_ptr<RpcAgent> g_agent;  // GUARDED_BY(g_mu)
// While init_rpc builds the agent, that agent already serves calls (its peers joined and may call at
// once); a function it runs that uses this API waits here until init_rpc publishes the agent.
bool g_initializing = false;  // GUARDED_BY(g_mu)
// Each init_rpc of a process joins under its own prefix: a job that starts RPC twice on one store (every
// process calls init_rpc the same number of times) never sees the keys of the earlier session.
int g_session = 0;  // GUARDED_BY(g_mu)

// The bind host when the caller left the default: a job whose store lives on another host needs its
// workers reachable from there too.
std::string default_bind_host(const store::Store& store, const std::string& name) {
  if (const auto iface = env::get("BRAID_SOCKET_IFNAME"); iface && !iface->empty()) {
    return security::interface_ipv4(*iface, "BRAID_SOCKET_IFNAME");
  }
  const std::string server = store.server_host();
  if (server.empty()) return TransportOptions{}.bind_host;
  const std::string what = fmt::format("init_rpc('{}'): choosing where RPC over TCP listens", name);
  const std::string iface = security::interface_toward(server, what);
  const std::string host =
      security::interface_ipv4(iface, fmt::format("{} (toward the store's host {})", what, server));
  logging::get("braid.rpc")->debug("init_rpc('{}'): listening on {} ({}, the interface toward the store's host {})",
                                   name, host, iface, server);
  return host;
}

}  // namespace

void init_rpc(const std::string& name, int rank, int world_size, RpcBackendOptions options) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    BRAID_CHECK_ARG(g_agent == nullptr, "init_rpc('{}'): RPC is already initialized in this process (as '{}')", name,
                    g_agent->self().name);
  }
  std::shared_ptr<store::Store> base = options.store;
  if (!base) {
    auto rv = store::rendezvous(options.init_method, rank, world_size, options.join_timeout);
    base = rv.store;
    rank = rv.rank;
    world_size = rv.world_size;
  }
  BRAID_CHECK_ARG(rank >= 0 && world_size >= 1,
                  "init_rpc('{}'): rank and world_size must be given when a store is (got {} and {})", name, rank,
                  world_size);
  RpcAgentOptions agent_options;
  agent_options.transport = options.transport;
  agent_options.num_worker_threads = options.num_worker_threads;
  agent_options.rpc_timeout = options.rpc_timeout;
  agent_options.join_timeout = options.join_timeout;
  agent_options.shutdown_timeout = options.shutdown_timeout;
  agent_options.on_peer_failure = options.on_peer_failure;
  agent_options.peer_ended = options.peer_ended;
  agent_options.on_peers_may_leave = options.on_peers_may_leave;
  agent_options.transport_options = options.transport_options;
  if (agent_options.transport_options.bind_host == TransportOptions{}.bind_host) {
    agent_options.transport_options.bind_host = default_bind_host(*base, name);
  }
  int session = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    session = g_session++;
  }
  const std::string prefix = options.store_prefix.empty() ? "rpc/" + std::to_string(session) : options.store_prefix;
  auto prefixed = std::make_shared<store::PrefixStore>(prefix, base);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_initializing = true;
  }
  struct Published {
    ~Published() {
      {
        std::lock_guard<std::mutex> lock(g_mu);
        g_initializing = false;
      }
      g_cv.notify_all();
    }
  } published;
  auto agent = std::make_shared<RpcAgent>(name, rank, world_size, prefixed, agent_options, global_registry());
  std::lock_guard<std::mutex> lock(g_mu);
  g_agent = std::move(agent);
}

void shutdown(bool graceful) {
  std::shared_ptr<RpcAgent> agent;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    agent = g_agent;
  }
  BRAID_CHECK_ARG(agent != nullptr, "rpc shutdown: RPC has not been initialized. Call init_rpc first");
  struct Clear {
    ~Clear() {
      std::lock_guard<std::mutex> lock(g_mu);
      g_agent.reset();
    }
  } clear;
  agent->shutdown(graceful);
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_agent != nullptr;
}

std::shared_ptr<RpcAgent> current_agent_shared() {
  std::unique_lock<std::mutex> lock(g_mu);
  g_cv.wait_for(lock, std::chrono::minutes(5), [] { return g_agent != nullptr || !g_initializing; });
  BRAID_CHECK_ARG(g_agent != nullptr, "RPC has not been initialized. Call init_rpc first");
  return g_agent;
}

RpcAgent& current_agent() { return *current_agent_shared(); }

WorkerInfo get_worker_info(const std::string& name) {
  auto agent = current_agent_shared();
  return name.empty() ? agent->self() : agent->worker(name);
}

std::vector<WorkerInfo> get_worker_infos() { return current_agent_shared()->workers(); }

Value rpc_sync(const std::string& to, const std::string& fn, const Args& args, Millis timeout) {
  auto agent = current_agent_shared();
  return agent->call_sync(agent->worker(to), fn, args, timeout);
}

Value rpc_sync(const WorkerInfo& to, const std::string& fn, const Args& args, Millis timeout) {
  return current_agent_shared()->call_sync(to, fn, args, timeout);
}

Future<Value> rpc_async(const std::string& to, const std::string& fn, const Args& args, Millis timeout) {
  auto agent = current_agent_shared();
  return agent->call_async(agent->worker(to), fn, args, timeout);
}

Future<Value> rpc_async(const WorkerInfo& to, const std::string& fn, const Args& args, Millis timeout) {
  return current_agent_shared()->call_async(to, fn, args, timeout);
}

RRef remote(const std::string& to, const std::string& fn, const Args& args, Millis timeout) {
  auto agent = current_agent_shared();
  return agent->remote(agent->worker(to), fn, args, timeout);
}

RRef remote(const WorkerInfo& to, const std::string& fn, const Args& args, Millis timeout) {
  return current_agent_shared()->remote(to, fn, args, timeout);
}

}  // namespace braid::rpc
