// RpcAgent, the serving side: running incoming calls on the thread pool, keeping remote() results as
// owned RRefs, answering to_here fetches and the RRef protocol's bookkeeping messages.
#include <fmt/format.h>

#include "base/check.h"
#include "base/fault_injection.h"
#include "base/logging.h"
#include "rpc/agent.h"
#include "rpc/value_codec.h"

namespace braid::rpc {

namespace {

constexpr uint8_t kTargetFunction = 0;
constexpr uint8_t kTargetMethod = 1;

std::string what_of(std::exception_ptr e) {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const RemoteError& re) {
    return re.what();  // a nested remote error keeps the worker it came from
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown exception";
  }
}

Future<Value> ready(Value v) {
  Future<Value> f("rpc result");
  f.set_value(std::move(v));
  return f;
}

// Runs a sync or async callable; an exception becomes the future's error.
template <class Sync, class Async, class... A>
Future<Value> run_callable(const std::variant<Sync, Async>& c, A&&... a) {
  try {
    if (const auto* sync = std::get_if<Sync>(&c)) return ready((*sync)(std::forward<A>(a)...));
    return std::get<Async>(c)(std::forward<A>(a)...);
  } catch (...) {
    Future<Value> f("rpc result");
    f.set_error(std::current_exception());
    return f;
  }
}

}  // namespace

void RpcAgent::serve(int peer, Message msg) {
  try {
    std::shared_ptr<IncomingCall> incoming;
    if (!msg.ext.empty()) {
      CallHooks* hooks = call_hooks();
      BRAID_CHECK_TYPED(WireError, hooks != nullptr && carries_call(msg.type),
                        "rpc: worker '{}' got a {} request with a {}-byte extension it has no hooks for (is "
                        "braid::dist_autograd linked into this program?)", self_.name, message_type_name(msg.type),
                        msg.ext.size());
      incoming = hooks->on_receive_request(peer, msg);
    }
    switch (msg.type) {
      case MessageType::kCall: serve_call(peer, msg, false, std::move(incoming)); break;
      case MessageType::kRemoteCall: serve_call(peer, msg, true, std::move(incoming)); break;
      case MessageType::kRRefFetch: serve_fetch(peer, msg, std::move(incoming)); break;
      default:
        BRAID_THROW(WireError, "rpc: worker '{}' got an unexpected {} request", self_.name,
                    message_type_name(msg.type));
    }
  } catch (...) {
    reply_error(peer, msg.id, what_of(std::current_exception()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  --serving_;
  drained_cv_.notify_all();
}

void RpcAgent::serve_call(int peer, Message& msg, bool keep_as_rref, std::shared_ptr<IncomingCall> incoming) {
  MetaReader r(msg.meta);
  std::shared_ptr<OwnerValue> kept;
  if (keep_as_rref) {
    const RRefId id = r.id("new rref id");
    (void)r.id("creator fork id");  // counted by on_message, in arrival order
    kept = rrefs_->owner_entry(id);
  }
  const uint8_t kind = r.u8("call target kind");
  BRAID_CHECK_TYPED(WireError, kind == kTargetFunction || kind == kTargetMethod, "rpc meta: unknown call target {}",
                    kind);
  const std::string name = r.str("call target name");
  // BRAID_FAULT's "rpc": serving a call (braid's own pings, aborts and bookkeeping excepted).
  if (name.rfind("braid.", 0) != 0) fault::point("rpc");
  const RRefId target = kind == kTargetMethod ? r.id("method rref id") : RRefId{};
  const RRefDecoder dec = decoder_for(peer);
  Args args;
  try {
    args = decode_args(r, msg.tensors, &dec);
    r.expect_end("call arguments");
  } catch (...) {
    if (kept) kept->value.set_error(std::current_exception());
    throw;
  }
  Future<Value> result;
  {
    // The hooks' state (distributed autograd's current context) holds while the function runs here.
    const std::shared_ptr<void> entered = incoming ? incoming->enter() : nullptr;
    result = invoke(kind, name, target, args, peer);
  }
  const uint64_t id = msg.id;
  result.add_callback([this, peer, id, kept, incoming](const Future<Value>& f) {
    if (auto err = f.error()) {
      if (kept) kept->value.set_error(err);
      reply_error(peer, id, what_of(err));
      return;
    }
    if (kept) {
      kept->value.set_value(f.value());
      reply_value(peer, id, Value());
    } else {
      reply_value(peer, id, f.value(), incoming.get());
    }
  });
}

Future<Value> RpcAgent::invoke(uint8_t target_kind, const std::string& name, RRefId rref_id, const Args& args,
                               int caller) {
  if (target_kind == kTargetMethod) {
    auto target = rrefs_->find_owner(rref_id);
    if (!target) {
      Future<Value> f("rpc result");
      f.set_error(std::make_exception_ptr(InvalidArgument(fmt::format(
          "worker '{}' owns no RRef {} (method '{}' called by worker {})", self_.name, rref_id.to_string(), name,
          caller))));
      return f;
    }
    return invoke_method(target, name, args, caller);
  }
  if (auto fn = registry_.find_function(name)) return run_callable(*fn, args);
  if (auto cls = registry_.find_class(name)) {
    try {
      BRAID_CHECK_ARG(cls->construct != nullptr, "class '{}' has no constructor registered", name);
      return ready(Value(cls->construct(args)));
    } catch (...) {
      Future<Value> f("rpc result");
      f.set_error(std::current_exception());
      return f;
    }
  }
  const auto names = registry_.names();
  Future<Value> f("rpc result");
  f.set_error(std::make_exception_ptr(InvalidArgument(
      fmt::format("worker '{}' has no function or class named '{}' (registered: {})", self_.name, name,
                  names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))))));
  return f;
}

Future<Value> RpcAgent::invoke_method(const std::shared_ptr<OwnerValue>& target, const std::string& method,
                                      const Args& args, int caller) {
  Future<Value> result("rpc method result");
  // The object may still be under construction by a remote() call: run once it exists.
  target->value.add_callback([this, result, method, args, caller, target](const Future<Value>& obj) {
    try {
      const Value& v = obj.value();
      BRAID_CHECK_ARG(v.is(Value::Kind::Object) && v.as_object() != nullptr,
                      "method '{}' called on RRef {} whose value is {}, not an object", method,
                      target->id.to_string(), v.describe());
      const ClassEntry* cls = v.as_object()->class_entry();
      BRAID_CHECK_ARG(cls != nullptr, "object {} has no registered class", v.describe());
      auto m = registry_.find_method(*cls, method);
      BRAID_CHECK_ARG(m.has_value(), "class '{}' on worker '{}' has no method '{}' (called by worker {})", cls->name,
                      self_.name, method, caller);
      Future<Value> r = run_callable(*m, *v.as_object(), args);
      r.add_callback([result](const Future<Value>& done) {
        if (auto err = done.error()) result.set_error(err);
        else result.set_value(done.value());
      });
    } catch (...) {
      result.set_error(std::current_exception());
    }
  });
  return result;
}

void RpcAgent::serve_fetch(int peer, Message& msg, std::shared_ptr<IncomingCall> incoming) {
  MetaReader r(msg.meta);
  const RRefId id = r.id("fetched rref id");
  r.expect_end("a fetch");
  auto target = rrefs_->find_owner(id);
  BRAID_CHECK_ARG(target != nullptr, "to_here: worker '{}' owns no RRef {} (asked by worker {})", self_.name,
                  id.to_string(), peer);
  const uint64_t req = msg.id;
  target->value.add_callback([this, peer, req, incoming](const Future<Value>& f) {
    if (auto err = f.error()) reply_error(peer, req, what_of(err));
    else reply_value(peer, req, f.value(), incoming.get());
  });
}

void RpcAgent::serve_rref_control(int peer, Message& msg) {
  try {
    MetaReader r(msg.meta);
    switch (msg.type) {
      case MessageType::kRRefForkRequest: {
        const RRefId id = r.id("rref id");
        const ForkId fork = r.id("fork id");
        r.expect_end("a fork request");
        rrefs_->add_fork(id, fork);
        break;
      }
      case MessageType::kRRefChildAccept: {
        const ForkId fork = r.id("fork id");
        r.expect_end("a child accept");
        rrefs_->on_child_accepted(fork);
        break;
      }
      case MessageType::kRRefUserDelete: {
        const RRefId id = r.id("rref id");
        const ForkId fork = r.id("fork id");
        r.expect_end("a user delete");
        rrefs_->delete_fork(id, fork);
        break;
      }
      default: break;  // kPing
    }
    reply_value(peer, msg.id, Value());
  } catch (...) {
    reply_error(peer, msg.id, what_of(std::current_exception()));
  }
}

void RpcAgent::reply_value(int peer, uint64_t id, const Value& value, IncomingCall* incoming) {
  Message reply;
  reply.type = MessageType::kResult;
  reply.id = id;
  try {
    MetaWriter w(reply.meta);
    const RRefEncoder enc = encoder_for(peer);
    encode_value(value, w, reply.tensors, &enc, incoming != nullptr ? &reply.sources : nullptr);
    if (incoming != nullptr) incoming->on_send_reply(peer, reply);
    reply.sources.clear();
  } catch (...) {
    reply_error(peer, id, fmt::format("the result could not be sent: {}", what_of(std::current_exception())));
    return;
  }
  try {
    deliver(peer, std::move(reply));
  } catch (const std::exception& e) {
    logging::get("braid.rpc")->warn("{}: reply #{} to worker {} not sent: {}", self_.name, id, peer, e.what());
  }
}

void RpcAgent::reply_error(int peer, uint64_t id, const std::string& message) {
  Message reply;
  reply.type = MessageType::kError;
  reply.id = id;
  MetaWriter w(reply.meta);
  w.str(self_.name);
  w.str(message);
  try {
    deliver(peer, std::move(reply));
  } catch (const std::exception& e) {
    logging::get("braid.rpc")->warn("{}: error reply #{} to worker {} not sent: {}", self_.name, id, peer, e.what());
  }
}

}  // namespace braid::rpc
