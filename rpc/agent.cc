// RpcAgent: sending requests and matching replies, deadlines and peer failures, and the client side of
// calls. Joining the job is in agent_join.cc, serving requests in agent_serve.cc, graceful shutdown in
// agent_shutdown.cc.
#include "rpc/agent.h"

#include <fmt/format.h>

#include "base/check.h"
#include "base/logging.h"
#include "rpc/call_hooks.h"
#include "rpc/value_codec.h"

namespace braid::rpc {

namespace {

using Clock = std::chrono::steady_clock;

// Target kinds of kCall / kRemoteCall.
constexpr uint8_t kTargetFunction = 0;
constexpr uint8_t kTargetMethod = 1;

}  // namespace

RpcAgent::RpcAgent(std::string name, int id, int world_size, std::shared_ptr<store::Store> store,
                   RpcAgentOptions options, Registry& registry, std::unique_ptr<Transport> transport)
    : self_{std::move(name), id}, world_size_(world_size), options_(std::move(options)), registry_(registry),
      store_(std::move(store)) {
  BRAID_CHECK_ARG(!self_.name.empty(), "init_rpc: the worker name must not be empty");
  BRAID_CHECK_ARG(self_.name.find_first_of(":/ ") == std::string::npos,
                  "init_rpc: worker name '{}' must not contain ':', '/' or spaces", self_.name);
  BRAID_CHECK_ARG(world_size_ >= 1 && id >= 0 && id < world_size_,
                  "init_rpc: rank {} is out of range for world_size {} (worker '{}')", id, world_size_, self_.name);
  BRAID_CHECK_ARG(options_.num_worker_threads >= 1, "init_rpc: num_worker_threads must be >= 1, got {}",
                  options_.num_worker_threads);
  BRAID_CHECK_ARG(options_.rpc_timeout.count() > 0, "init_rpc: rpc_timeout must be positive, got {} ms",
                  options_.rpc_timeout.count());
  BRAID_CHECK_ARG(store_ != nullptr, "init_rpc: worker '{}' needs a store", self_.name);
  if (transport) {
    transport_ = std::move(transport);
    transport_reason_ = "given to the agent";
  } else {
    transport_ = create_transport(options_.transport, options_.transport_options, &transport_reason_);
  }
  rrefs_ = std::make_shared<RRefContext>(this, self_);
  join_job(*store_);
  pool_ = std::make_unique<ThreadPool>(options_.num_worker_threads, fmt::format("rpc pool of {}", self_.name));
  timer_ = std::thread([this] { timer_loop(); });
  TransportHandlers handlers;
  handlers.on_message = [this](int peer, Message msg) { on_message(peer, std::move(msg)); };
  handlers.on_peer_failure = [this](int peer, const std::string& reason) { on_peer_failure(peer, reason); };
  // Peers first: a peer that already joined may connect the moment this transport accepts.
  std::vector<PeerInfo> peers;
  for (const auto& w : workers_) {
    if (w.id != self_.id) peers.push_back(PeerInfo{w.id, w.name, addresses_[static_cast<size_t>(w.id)]});
  }
  transport_->add_peers(peers);
  transport_->start(self_.id, std::move(handlers));
  logging::get("braid.rpc")->info("{} (id {}) joined an RPC job of {} workers over {} ({})", self_.name, self_.id,
                                  world_size_, transport_->name(), transport_reason_);
}

RpcAgent::~RpcAgent() {
  try {
    shutdown(false);
  } catch (const std::exception& e) {
    logging::get("braid.rpc")->error("{}: shutdown in the destructor failed: {}", self_.name, e.what());
  }
}

const WorkerInfo& RpcAgent::worker(const std::string& name) const {
  auto it = ids_by_name_.find(name);
  if (it == ids_by_name_.end()) {
    std::vector<std::string> known;
    for (const auto& w : workers_) known.push_back(w.name);
    BRAID_THROW(InvalidArgument, "rpc: unknown destination worker '{}' (known workers: {})", name,
                fmt::join(known, ", "));
  }
  return workers_[static_cast<size_t>(it->second)];
}

const WorkerInfo& RpcAgent::worker(int id) const {
  BRAID_CHECK_ARG(id >= 0 && id < world_size_, "rpc: unknown destination worker id {} (world size {})", id,
                  world_size_);
  return workers_[static_cast<size_t>(id)];
}

bool RpcAgent::is_running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_ == State::kRunning || state_ == State::kDraining;
}

void RpcAgent::check_running(const char* op) const {
  std::lock_guard<std::mutex> lock(mu_);
  BRAID_CHECK_ARG(state_ == State::kRunning || state_ == State::kDraining,
                  "{}: the RPC agent of worker '{}' has shut down (call init_rpc first)", op, self_.name);
}

// ---- requests and replies

void RpcAgent::send_request(int to, MessageType type, std::vector<uint8_t> meta, std::vector<Tensor> tensors,
                            Millis timeout, std::string what, ReplyHandler on_reply) {
  Message msg;
  msg.type = type;
  msg.meta = std::move(meta);
  msg.tensors = std::move(tensors);
  send_message(to, std::move(msg), timeout, std::move(what), std::move(on_reply));
}

void RpcAgent::send_message(int to, Message msg, Millis timeout, std::string what, ReplyHandler on_reply) {
  if (CallHooks* hooks = call_hooks(); hooks != nullptr && carries_call(msg.type)) {
    try {
      hooks->on_send_request(to, msg);
    } catch (...) {
      on_reply(nullptr, std::current_exception());
      return;
    }
  }
  msg.sources.clear();  // sender-side only: a call to this worker itself must not keep them alive
  const Millis t = resolve(timeout);
  bool wake_timer = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (state_ == State::kClosing || state_ == State::kStopped) {
      lock.unlock();
      on_reply(nullptr, std::make_exception_ptr(CommError(
                            fmt::format("{}: the RPC agent of worker '{}' has shut down", what, self_.name))));
      return;
    }
    msg.id = next_request_id_++;
    const auto deadline = Clock::now() + t;
    wake_timer = deadline < timer_wake_at_;
    auto dl = deadlines_.emplace(deadline, msg.id);
    pending_.emplace(msg.id, Pending{to, dl, std::move(what), t, std::move(on_reply)});
  }
  if (wake_timer) timer_cv_.notify_one();
  const uint64_t id = msg.id;
  try {
    deliver(to, std::move(msg));
  } catch (...) {
    complete(id, nullptr, std::current_exception());
  }
}

void RpcAgent::deliver(int to, Message msg) {
  if (to == self_.id) {
    // Fresh handles (same storage): a call to this worker sees its tensors as a peer would, without the
    // caller's autograd state (distributed autograd records the edge itself).
    for (auto& t : msg.tensors) t = t.alias();
    on_message(self_.id, std::move(msg));
  } else {
    transport_->send(to, std::move(msg));
  }
}

void RpcAgent::complete(uint64_t id, Message* reply, std::exception_ptr error) {
  ReplyHandler handler;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;  // timed out or failed already: a late reply is dropped
    deadlines_.erase(it->second.deadline_it);
    handler = std::move(it->second.on_reply);
    pending_.erase(it);
    if (pending_.empty()) drained_cv_.notify_all();
  }
  handler(reply, std::move(error));
}

void RpcAgent::on_message(int peer, Message msg) {
  if (dead_count_.load(std::memory_order_relaxed) > 0) {
    // A peer heard from again (a reconnect after a malformed frame, say) is not dead.
    std::lock_guard<std::mutex> lock(mu_);
    if (dead_.erase(peer) > 0) dead_count_.store(dead_.size(), std::memory_order_relaxed);
  }
  if (is_reply(msg.type)) {
    if (msg.type == MessageType::kError) {
      std::exception_ptr err;
      try {
        MetaReader r(msg.meta);
        std::string worker = r.str("error worker");
        std::string message = r.str("error message");
        err = std::make_exception_ptr(RemoteError(std::move(worker), std::move(message)));
      } catch (...) {
        err = std::current_exception();
      }
      complete(msg.id, nullptr, err);
    } else if (!msg.ext.empty() && call_hooks() != nullptr) {
      try {
        call_hooks()->on_receive_reply(peer, msg);
      } catch (...) {
        complete(msg.id, nullptr, std::current_exception());
        return;
      }
      complete(msg.id, &msg, nullptr);
    } else {
      complete(msg.id, &msg, nullptr);
    }
    return;
  }
  switch (msg.type) {
    case MessageType::kRRefForkRequest:
    case MessageType::kRRefChildAccept:
    case MessageType::kRRefUserDelete:
    case MessageType::kPing:
      serve_rref_control(peer, msg);  // cheap bookkeeping: no hop to the pool
      return;
    default: break;
  }
  if (msg.type == MessageType::kRemoteCall) {
    // Count the creator's fork here, in arrival order: a method call or to_here the creator sends right
    // after remote() may reach a pool thread before this call does, and must find the (pending) value.
    try {
      MetaReader r(msg.meta);
      const RRefId id = r.id("new rref id");
      rrefs_->add_fork(id, r.id("creator fork id"));
    } catch (const std::exception& e) {
      reply_error(peer, msg.id, e.what());
      return;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::kClosing || state_ == State::kStopped) return;
    ++serving_;
  }
  pool_->submit([this, peer, m = std::move(msg)]() mutable { serve(peer, std::move(m)); });
}

void RpcAgent::on_peer_failure(int peer, const std::string& reason) {
  std::vector<std::pair<std::string, ReplyHandler>> failed;
  bool quiet = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    quiet = state_ != State::kRunning;
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.peer == peer) {
        deadlines_.erase(it->second.deadline_it);
        failed.emplace_back(std::move(it->second.what), std::move(it->second.on_reply));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    if (peer >= 0 && peer < world_size_) {
      dead_[peer] = reason;
      dead_count_.store(dead_.size(), std::memory_order_relaxed);
    }
    if (pending_.empty()) drained_cv_.notify_all();
  }
  const std::string peer_name = peer >= 0 && peer < world_size_ ? worker(peer).name : "?";
  auto log = logging::get("braid.rpc");
  if (quiet && failed.empty()) {
    log->debug("{}: connection to '{}' (id {}) ended during shutdown: {}", self_.name, peer_name, peer, reason);
  } else {
    log->error("{}: peer '{}' (id {}) failed: {}; failing {} pending call(s) to it", self_.name, peer_name, peer,
               reason, failed.size());
  }
  for (auto& [what, handler] : failed) {
    handler(nullptr, std::make_exception_ptr(CommError(fmt::format(
                         "{}: peer '{}' (id {}) failed: {}", what, peer_name, peer, reason))));
  }
  if (options_.on_peer_failure) {
    try {
      options_.on_peer_failure(peer, reason);
    } catch (const std::exception& e) {
      log->error("{}: the peer-failure callback for '{}' failed: {}", self_.name, peer_name, e.what());
    }
  }
}

std::map<int, std::string> RpcAgent::dead_peers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dead_;
}

void RpcAgent::timer_loop() {
  // With nothing pending the thread still wakes every kTimerHeartbeat: a call's deadline (never sooner
  // than its send) is then checked within that time even though the send did not wake the thread.
  constexpr Millis kTimerHeartbeat{50};
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (state_ == State::kStopped) return;
    const auto now = Clock::now();
    if (deadlines_.empty() || now < deadlines_.begin()->first) {
      timer_wake_at_ = now + kTimerHeartbeat;
      if (!deadlines_.empty()) timer_wake_at_ = std::min(timer_wake_at_, deadlines_.begin()->first);
      timer_cv_.wait_until(lock, timer_wake_at_);
      continue;
    }
    const uint64_t id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    Pending p = std::move(it->second);
    pending_.erase(it);
    if (pending_.empty()) drained_cv_.notify_all();
    lock.unlock();
    const std::string& peer = p.peer >= 0 && p.peer < world_size_ ? workers_[static_cast<size_t>(p.peer)].name : "?";
    p.on_reply(nullptr, std::make_exception_ptr(TimeoutError(fmt::format(
                            "{} to '{}' timed out after {} ms: RPC ran for more than set timeout ({} ms) and will "
                            "now be marked with an error",
                            p.what, peer, p.timeout.count(), p.timeout.count()))));
    lock.lock();
  }
}

// ---- encoding with RRef forks

RRefEncoder RpcAgent::encoder_for(int dst) {
  return [this, dst](const RRef& r) { return rrefs_->fork_for(r, dst); };
}

RRefDecoder RpcAgent::decoder_for(int src) {
  return [this, src](const RRefForkData& fd) { return rrefs_->on_fork_received(fd, src); };
}

Value RpcAgent::decode_reply(int peer, Message& reply) {
  MetaReader r(reply.meta);
  const RRefDecoder dec = decoder_for(peer);
  Value v = decode_value(r, reply.tensors, &dec);
  r.expect_end("a reply");
  return v;
}

Future<Value> RpcAgent::value_future(const std::string& what, int peer, Message msg, Millis timeout) {
  Future<Value> result(what);
  send_message(peer, std::move(msg), timeout, what,
               [this, result, peer](Message* reply, std::exception_ptr error) {
                 if (error) {
                   result.set_error(std::move(error));
                   return;
                 }
                 try {
                   result.set_value(decode_reply(peer, *reply));
                 } catch (...) {
                   result.set_error(std::current_exception());
                 }
               });
  return result;
}

// ---- the client side of calls

namespace {

Message request_of(MessageType type) {
  Message m;
  m.type = type;
  return m;
}

}  // namespace

Future<Value> RpcAgent::call_async(const WorkerInfo& to, const std::string& fn, const Args& args, Millis timeout) {
  check_running("rpc_async");
  const WorkerInfo& dst = worker(to.name);
  Message m = request_of(MessageType::kCall);
  MetaWriter w(m.meta);
  w.u8(kTargetFunction);
  w.str(fn);
  const RRefEncoder enc = encoder_for(dst.id);
  encode_args(args, w, m.tensors, &enc, &m.sources);
  return value_future(fmt::format("rpc to '{}' of '{}'", dst.name, fn), dst.id, std::move(m), timeout);
}

Value RpcAgent::call_sync(const WorkerInfo& to, const std::string& fn, const Args& args, Millis timeout) {
  auto f = call_async(to, fn, args, timeout);
  // The agent's deadline fails the future with the precise error; the wait here is a backstop.
  return f.value(resolve(timeout) + Millis(5000));
}

RRef RpcAgent::remote(const WorkerInfo& to, const std::string& fn, const Args& args, Millis timeout) {
  check_running("remote");
  const WorkerInfo& dst = worker(to.name);
  if (dst.id == self_.id) {
    auto ov = std::make_shared<OwnerValue>();
    ov->id = rrefs_->new_id();
    RRef rref = rrefs_->make_owner_handle(ov);
    Future<Value> result = invoke(kTargetFunction, fn, RRefId{}, args, self_.id);
    result.add_callback([ov](const Future<Value>& f) {
      if (auto err = f.error()) ov->value.set_error(err);
      else ov->value.set_value(f.value());
    });
    return rref;
  }
  const RRefId id = rrefs_->new_id();
  RRef rref = rrefs_->make_creator_user(dst, id);
  Message m = request_of(MessageType::kRemoteCall);
  MetaWriter w(m.meta);
  w.id(id);
  w.id(id);
  w.u8(kTargetFunction);
  w.str(fn);
  const RRefEncoder enc = encoder_for(dst.id);
  encode_args(args, w, m.tensors, &enc, &m.sources);
  auto state = rref.state();
  send_message(dst.id, std::move(m), timeout,
               fmt::format("remote on '{}' of '{}'", dst.name, fn),
               [this, state](Message*, std::exception_ptr error) { rrefs_->on_creation_confirmed(state, error); });
  return rref;
}

Future<Value> RpcAgent::call_method_async(const RRef& rref, const std::string& method, const Args& args,
                                          Millis timeout) {
  check_running("rref.rpc_async");
  const auto& s = rref.state();
  if (auto err = s->creation_error()) std::rethrow_exception(err);
  if (s->is_owner) {
    return invoke_method(s->owner_value, method, args, self_.id);
  }
  Message m = request_of(MessageType::kCall);
  MetaWriter w(m.meta);
  w.u8(kTargetMethod);
  w.str(method);
  w.id(s->rref_id);
  const RRefEncoder enc = encoder_for(s->owner.id);
  encode_args(args, w, m.tensors, &enc, &m.sources);
  Future<Value> f = value_future(fmt::format("rpc to '{}' of method '{}' of RRef {}", s->owner.name, method,
                                             s->rref_id.to_string()),
                                 s->owner.id, std::move(m), timeout);
  f.add_callback([keep = rref](const Future<Value>&) {});  // the user stays alive until the reply
  return f;
}

RRef RpcAgent::remote_method(const RRef& rref, const std::string& method, const Args& args, Millis timeout) {
  check_running("rref.remote");
  const auto& s = rref.state();
  if (auto err = s->creation_error()) std::rethrow_exception(err);
  if (s->is_owner) {
    auto ov = std::make_shared<OwnerValue>();
    ov->id = rrefs_->new_id();
    RRef result = rrefs_->make_owner_handle(ov);
    invoke_method(s->owner_value, method, args, self_.id).add_callback([ov](const Future<Value>& f) {
      if (auto err = f.error()) ov->value.set_error(err);
      else ov->value.set_value(f.value());
    });
    return result;
  }
  const RRefId id = rrefs_->new_id();
  RRef result = rrefs_->make_creator_user(s->owner, id);
  Message m = request_of(MessageType::kRemoteCall);
  MetaWriter w(m.meta);
  w.id(id);
  w.id(id);
  w.u8(kTargetMethod);
  w.str(method);
  w.id(s->rref_id);
  const RRefEncoder enc = encoder_for(s->owner.id);
  encode_args(args, w, m.tensors, &enc, &m.sources);
  auto state = result.state();
  send_message(s->owner.id, std::move(m), timeout,
               fmt::format("remote on '{}' of method '{}'", s->owner.name, method),
               [this, state, keep = rref](Message*, std::exception_ptr error) {
                 rrefs_->on_creation_confirmed(state, error);
               });
  return result;
}

Future<Value> RpcAgent::fetch(const RRef& rref, Millis timeout) {
  check_running("rref.to_here");
  const auto& s = rref.state();
  if (auto err = s->creation_error()) std::rethrow_exception(err);
  if (s->is_owner) return s->owner_value->value;
  Message m = request_of(MessageType::kRRefFetch);
  MetaWriter w(m.meta);
  w.id(s->rref_id);
  Future<Value> f = value_future(fmt::format("to_here of RRef {} from '{}'", s->rref_id.to_string(), s->owner.name),
                                 s->owner.id, std::move(m), timeout);
  f.add_callback([keep = rref](const Future<Value>&) {});
  return f;
}

RRef RpcAgent::make_local_rref(Value value) {
  check_running("RRef");
  return rrefs_->make_owner(std::move(value));
}

}  // namespace braid::rpc
