// RpcAgent: one worker of an RPC job — its name and id, a transport to every other worker, a thread pool
// that runs incoming calls, the pending calls it made, and its side of the RRef protocol.
//
// Construction joins the job: it publishes {name, id, transport address} in the store, checks that the
// name is unique ("RPC worker name 'x' is already taken by worker 3"), and waits (up to the rpc timeout)
// for every other worker's entry. Calls to a worker go through the transport; calls to itself are
// handled in process (they still run on the thread pool). Every call has a deadline (its timeout, or the
// default rpc_timeout); a reply that misses it fails the future with TimeoutError, and a peer whose
// connection breaks fails every pending call towards it with CommError naming the peer.
//
// Futures returned by call_async complete on a transport thread: their callbacks must not block (as
// PyTorch's). shutdown(graceful=true) waits for the job (rpc/agent_shutdown.cc); shutdown(false) fails
// what is pending and closes at once. No thread or socket outlives shutdown().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/future.h"
#include "rpc/call_hooks.h"
#include "rpc/message.h"
#include "rpc/registry.h"
#include "rpc/rref.h"
#include "rpc/rref_context.h"
#include "rpc/thread_pool.h"
#include "rpc/transport.h"
#include "rpc/value.h"
#include "store/store.h"

namespace braid::rpc {

struct RpcAgentOptions {
  // "auto" (ucx when braid was built with it, else tcp), "tcp" or "ucx"; every worker of a job must end up
  // on the same one (init fails naming both otherwise). rpc/transport.h choose_transport.
  std::string transport = "auto";
  int num_worker_threads = 8;
  Millis rpc_timeout{60'000};     // default per-call timeout (PyTorch: 60 s)
  Millis join_timeout{300'000};   // init and graceful-shutdown barriers
  // Graceful shutdown's barriers alone, when set (0: join_timeout). A job runtime bounds them by its
  // failure timeout: every worker is done by then, and one that does not arrive has hung.
  Millis shutdown_timeout{0};
  TransportOptions transport_options;
  // Called once per peer failure (a broken connection, or a peer that cannot be reached), after the calls
  // pending towards it have failed: on a transport thread, so it must not block (no RPC from it). A job
  // runtime uses it to act on a peer's death at once instead of at its next timeout.
  std::function<void(int peer, const std::string& reason)> on_peer_failure;
  // Why a peer's process has ended, when the caller can see it without RPC (a job runtime sees the
  // processes on its own host), or "" when it cannot tell. Graceful shutdown's barriers ask it, every
  // slice, for each worker they miss: a worker that has not arrived at a barrier cannot have left the job
  // normally, so one whose process has ended died, and the barrier fails at once naming it. A peer
  // killed before it ever talked to this worker breaks no connection here, and a launcher (mpirun) may
  // end this process before a liveness probe would find it. Called on the shutting-down thread.
  std::function<std::string(int peer)> peer_ended;
  // Called once, on the shutting-down thread, as this worker arrives at graceful shutdown's last barrier
  // (or starts a shutdown that is not graceful): from then on peers may finish their shutdown and close
  // their connections normally. Before it none can (the barrier needs this worker), so a peer whose
  // connection breaks or whose process ends has died.
  std::function<void()> on_peers_may_leave;
};

// What a reply handler receives: the reply (kResult) or the error (remote error, timeout, peer failure).
using ReplyHandler = std::function<void(Message* reply, std::exception_ptr error)>;

class RpcAgent {
 public:
  // `store` is private to RPC (callers give a PrefixStore). `transport` may be given (tests); otherwise
  // it is created from options.transport.
  RpcAgent(std::string name, int id, int world_size, std::shared_ptr<store::Store> store, RpcAgentOptions options,
           Registry& registry, std::unique_ptr<Transport> transport = nullptr);
  ~RpcAgent();
  RpcAgent(const RpcAgent&) = delete;
  RpcAgent& operator=(const RpcAgent&) = delete;

  const WorkerInfo& self() const { return self_; }
  int world_size() const { return world_size_; }
  // InvalidArgument "unknown destination worker 'x' (known: ...)".
  const WorkerInfo& worker(const std::string& name) const;
  const WorkerInfo& worker(int id) const;
  std::vector<WorkerInfo> workers() const { return workers_; }
  Millis default_timeout() const { return options_.rpc_timeout; }
  Millis shutdown_timeout() const {
    return options_.shutdown_timeout.count() > 0 ? options_.shutdown_timeout : options_.join_timeout;
  }
  Registry& registry() const { return registry_; }
  std::string transport_name() const { return transport_->name(); }
  // Why this transport: "asked for", "auto: braid was built with UCX ...", "given to the agent".
  const std::string& transport_reason() const { return transport_reason_; }
  // Worker `id`'s transport address as published at join ("127.0.0.1:41234" for tcp).
  const std::vector<uint8_t>& address_of(int id) const { return addresses_.at(static_cast<size_t>(id)); }

  // Runs function `fn` on `to`.
  Future<Value> call_async(const WorkerInfo& to, const std::string& fn, const Args& args,
                           Millis timeout = kUseDefaultTimeout);
  Value call_sync(const WorkerInfo& to, const std::string& fn, const Args& args, Millis timeout = kUseDefaultTimeout);
  // Runs function (or constructs class) `fn` on `to`, keeping the result there.
  RRef remote(const WorkerInfo& to, const std::string& fn, const Args& args, Millis timeout = kUseDefaultTimeout);
  // Method calls on the object behind `rref`, run on its owner.
  Future<Value> call_method_async(const RRef& rref, const std::string& method, const Args& args, Millis timeout);
  RRef remote_method(const RRef& rref, const std::string& method, const Args& args, Millis timeout);
  // A copy of the value behind `rref` (to_here).
  Future<Value> fetch(const RRef& rref, Millis timeout);
  RRef make_local_rref(Value value);

  // Graceful shutdown stops waiting for peers known dead: the barrier that misses only such peers fails at
  // once with CommError naming them (the agent still closes), rather than waiting its timeout.
  void shutdown(bool graceful = true);
  bool is_running() const;
  // The peers known dead: their connection broke (or they could not be reached) and nothing has arrived
  // from them since. Id -> the transport's reason.
  std::map<int, std::string> dead_peers() const;
  RRefCounts rref_counts() const { return rrefs_->counts(); }
  // Values still referenced by forks when the last graceful shutdown finished (0 when none leaked).
  size_t leaked_rrefs() const { return leaked_rrefs_; }

  // Used by the RRef protocol: sends a request and calls `on_reply` exactly once.
  void send_request(int to, MessageType type, std::vector<uint8_t> meta, std::vector<Tensor> tensors,
                    Millis timeout, std::string what, ReplyHandler on_reply);

 private:
  using Deadlines = std::multimap<std::chrono::steady_clock::time_point, uint64_t>;
  struct Pending {
    int peer = -1;
    Deadlines::iterator deadline_it;
    std::string what;
    Millis timeout{0};
    ReplyHandler on_reply;
  };

  // send_request's body: runs the call hooks for requests that carry calls, then sends.
  void send_message(int to, Message msg, Millis timeout, std::string what, ReplyHandler on_reply);
  static bool carries_call(MessageType t) {
    return t == MessageType::kCall || t == MessageType::kRemoteCall || t == MessageType::kRRefFetch;
  }
  void join_job(store::Store& store);
  void on_message(int peer, Message msg);
  void on_peer_failure(int peer, const std::string& reason);
  void deliver(int to, Message msg);
  void complete(uint64_t id, Message* reply, std::exception_ptr error);
  void timer_loop();
  Millis resolve(Millis timeout) const { return timeout == kUseDefaultTimeout ? options_.rpc_timeout : timeout; }
  void check_running(const char* op) const;

  // Serving requests (agent_serve.cc).
  void serve(int peer, Message msg);
  void serve_call(int peer, Message& msg, bool keep_as_rref, std::shared_ptr<IncomingCall> incoming);
  void serve_fetch(int peer, Message& msg, std::shared_ptr<IncomingCall> incoming);
  void serve_rref_control(int peer, Message& msg);
  // `incoming` (may be null): the call hooks' view of the request this replies to.
  void reply_value(int peer, uint64_t id, const Value& value, IncomingCall* incoming = nullptr);
  void reply_error(int peer, uint64_t id, const std::string& message);
  // Runs function (or constructor) `name`, or method `name` of the object behind owned RRef `rref_id`:
  // a future of the result (already complete for synchronous functions).
  Future<Value> invoke(uint8_t target_kind, const std::string& name, RRefId rref_id, const Args& args, int caller);
  Future<Value> invoke_method(const std::shared_ptr<OwnerValue>& target, const std::string& method, const Args& args,
                              int caller);

  // Encoding with RRef forking towards `dst`, decoding with forks received from `src`.
  RRefEncoder encoder_for(int dst);
  RRefDecoder decoder_for(int src);
  Value decode_reply(int peer, Message& reply);
  Future<Value> value_future(const std::string& what, int peer, Message msg, Millis timeout);

  // Graceful shutdown (agent_shutdown.cc).
  void wait_drained(const char* phase, std::chrono::steady_clock::time_point deadline);
  void store_barrier(const std::string& phase, std::chrono::steady_clock::time_point deadline);
  void leave_store(std::chrono::steady_clock::time_point deadline);
  // Waits for `keys` in the store until `deadline`, in short slices; between them, fails with CommError when
  // every worker in `missing()` is known dead, and pings the missing ones once, so that a dead peer this
  // worker never talked to is found out too (its connect fails).
  void wait_for_peers(const std::vector<std::string>& keys, std::chrono::steady_clock::time_point deadline,
                      const std::string& what, const std::function<std::vector<int>()>& missing);

  const WorkerInfo self_;
  const int world_size_;
  RpcAgentOptions options_;
  Registry& registry_;
  std::shared_ptr<store::Store> store_;
  std::vector<WorkerInfo> workers_;  // by id
  std::vector<std::vector<uint8_t>> addresses_;  // transport addresses, by id
  std::map<std::string, int, std::less<>> ids_by_name_;
  std::unique_ptr<Transport> transport_;
  std::string transport_reason_;
  std::shared_ptr<RRefContext> rrefs_;

  mutable std::mutex mu_;
  std::condition_variable drained_cv_;
  std::unordered_map<uint64_t, Pending> pending_;                       // GUARDED_BY(mu_)
  Deadlines deadlines_;                                                  // GUARDED_BY(mu_)
  uint64_t next_request_id_ = 1;                                         // GUARDED_BY(mu_)
  enum class State { kRunning, kDraining, kClosing, kStopped } state_ = State::kRunning;  // GUARDED_BY(mu_)
  size_t serving_ = 0;  // requests being served (for draining)            GUARDED_BY(mu_)
  std::map<int, std::string> dead_;  // peers known dead (dead_peers())       GUARDED_BY(mu_)
  std::atomic<size_t> dead_count_{0};  // dead_.size(): on_message skips the lock when 0
  std::condition_variable timer_cv_;
  // When the timer thread wakes next on its own (GUARDED_BY(mu_)): a send wakes it only for an earlier
  // deadline, so a call costs no extra thread wake-up in the common case.
  std::chrono::steady_clock::time_point timer_wake_at_{};
  std::thread timer_;
  std::unique_ptr<ThreadPool> pool_;
  size_t leaked_rrefs_ = 0;
};

}  // namespace braid::rpc
