// The process-wide RPC API, as torch.distributed.rpc: one agent per process, started by init_rpc.
//
//   RpcBackendOptions opts;                 // transport "auto" (default), "tcp" or "ucx", threads, timeout, ...
//   opts.init_method = "file:///tmp/job";   // or env:// (MASTER_ADDR/PORT), tcp://host:port, or opts.store
//   init_rpc("worker0", rank, world_size, opts);
//   Value sum = rpc_sync("worker1", "add", {Value(t1), Value(t2)});
//   Future<Value> f = rpc_async("worker1", "add", {Value(t1), Value(t2)});
//   RRef net = remote("worker1", "RemoteNet", {Value(int64_t{4})});
//   Value out = net.rpc_sync().call("forward", {Value(x)});
//   shutdown();                              // graceful: waits for every worker (see agent_shutdown.cc)
//
// Calling any of these before init_rpc (or after shutdown) throws InvalidArgument "RPC has not been
// initialized. Call init_rpc first". rank / world_size of -1 come from the launcher's environment.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rpc/agent.h"
#include "rpc/registry.h"
#include "rpc/rref.h"
#include "rpc/value.h"
#include "store/store.h"

namespace braid::rpc {

struct RpcBackendOptions {
  std::string transport = "auto";  // "auto" (ucx when built with it, else tcp), "tcp" or "ucx"
  int num_worker_threads = 8;
  Millis rpc_timeout{60'000};
  std::string init_method = "env://";
  // When set, RPC joins through this store (under the prefix "rpc/") instead of init_method.
  std::shared_ptr<store::Store> store;
  // bind_host: left at its default (127.0.0.1), RPC over TCP listens on the address of
  // BRAID_SOCKET_IFNAME, or else of the interface toward the store's server host
  // (security::interface_toward): loopback on one host, the network the hosts share across hosts.
  TransportOptions transport_options;
  Millis join_timeout{300'000};
  Millis shutdown_timeout{0};  // RpcAgentOptions::shutdown_timeout
  // RpcAgentOptions::on_peer_failure: called on a transport thread when a peer's connection breaks.
  std::function<void(int peer, const std::string& reason)> on_peer_failure;
  // RpcAgentOptions::peer_ended: why a peer's process has ended, as the caller can see it, or "".
  std::function<std::string(int peer)> peer_ended;
  // RpcAgentOptions::on_peers_may_leave: this worker arrives at graceful shutdown's last barrier.
  std::function<void()> on_peers_may_leave;
  // Where this job's keys go in the store. Empty: "rpc/<n>", n counting this process's init_rpc calls,
  // which every process of the job must then have made equally often (a job re-initialized on the same
  // store never sees its earlier keys). Processes that joined unequally often (a test's helper process)
  // agree on a prefix here instead.
  std::string store_prefix;
};

void init_rpc(const std::string& name, int rank = -1, int world_size = -1, RpcBackendOptions options = {});
void shutdown(bool graceful = true);
bool is_initialized();

// The running agent; InvalidArgument when there is none.
RpcAgent& current_agent();
std::shared_ptr<RpcAgent> current_agent_shared();

WorkerInfo get_worker_info(const std::string& name = "");
std::vector<WorkerInfo> get_worker_infos();

Value rpc_sync(const std::string& to, const std::string& fn, const Args& args = {},
               Millis timeout = kUseDefaultTimeout);
Value rpc_sync(const WorkerInfo& to, const std::string& fn, const Args& args = {},
               Millis timeout = kUseDefaultTimeout);
Future<Value> rpc_async(const std::string& to, const std::string& fn, const Args& args = {},
                        Millis timeout = kUseDefaultTimeout);
Future<Value> rpc_async(const WorkerInfo& to, const std::string& fn, const Args& args = {},
                        Millis timeout = kUseDefaultTimeout);
RRef remote(const std::string& to, const std::string& fn, const Args& args = {}, Millis timeout = kUseDefaultTimeout);
RRef remote(const WorkerInfo& to, const std::string& fn, const Args& args = {}, Millis timeout = kUseDefaultTimeout);

}  // namespace braid::rpc
