#include "rpc/rref.h"

#include <fmt/format.h>

#include "base/check.h"
#include "rpc/agent.h"
#include "rpc/api.h"
#include "rpc/rref_context.h"
#include "rpc/value.h"

namespace braid::rpc {

namespace {

RpcAgent& agent_of(const RRefState& s, const char* op) {
  RpcAgent* agent = s.ctx->agent();
  BRAID_CHECK_ARG(agent != nullptr, "RRef.{}: the RPC agent of worker '{}' has shut down", op, s.ctx->self().name);
  return *agent;
}

// Waits a little longer than the call's own deadline, so that the agent's precise timeout error wins.
Value wait_value(const Future<Value>& f, Millis timeout, const RpcAgent& agent) {
  const Millis t = timeout == kUseDefaultTimeout ? agent.default_timeout() : timeout;
  return f.value(t + Millis(5000));
}

}  // namespace

RRef RRef::local(Value value) { return current_agent().make_local_rref(std::move(value)); }

const RRefState& RRef::checked() const {
  BRAID_CHECK_ARG(state_ != nullptr, "RRef: the handle is null");
  return *state_;
}

WorkerInfo RRef::owner() const { return checked().owner; }
const std::string& RRef::owner_name() const { return checked().owner.name; }
bool RRef::is_owner() const { return checked().is_owner; }
bool RRef::confirmed_by_owner() const { return checked().confirmed(); }
RRefId RRef::rref_id() const { return checked().rref_id; }
ForkId RRef::fork_id() const { return checked().fork_id; }

std::string RRef::describe() const {
  if (!state_) return "RRef(null)";
  return fmt::format("RRef(owner={}, id={}, fork={})", state_->owner.name, state_->rref_id.to_string(),
                     state_->fork_id.to_string());
}

Value RRef::local_value() const {
  const RRefState& s = checked();
  BRAID_CHECK_ARG(s.is_owner,
                  "RRef.local_value(): worker '{}' is not the owner of {} (its owner is '{}'); call it on the "
                  "owner, or use to_here() for a copy",
                  s.ctx->self().name, describe(), s.owner.name);
  RpcAgent* agent = s.ctx->agent();
  const Millis t = agent != nullptr ? agent->default_timeout() : kDefaultFutureTimeout;
  return s.owner_value->value.value(t);
}

Value RRef::to_here(Millis timeout) const {
  const RRefState& s = checked();
  RpcAgent& agent = agent_of(s, "to_here");
  return wait_value(agent.fetch(*this, timeout), timeout, agent);
}

RRefSyncProxy RRef::rpc_sync(Millis timeout) const { return RRefSyncProxy(state_, timeout); }
RRefAsyncProxy RRef::rpc_async(Millis timeout) const { return RRefAsyncProxy(state_, timeout); }
RRefRemoteProxy RRef::remote(Millis timeout) const { return RRefRemoteProxy(state_, timeout); }

Value RRefSyncProxy::call(const std::string& method, const Args& args) const {
  RRef rref(state_);
  RpcAgent& agent = agent_of(*rref.state(), "rpc_sync");
  return wait_value(agent.call_method_async(rref, method, args, timeout_), timeout_, agent);
}

Future<Value> RRefAsyncProxy::call(const std::string& method, const Args& args) const {
  RRef rref(state_);
  return agent_of(*rref.state(), "rpc_async").call_method_async(rref, method, args, timeout_);
}

RRef RRefRemoteProxy::call(const std::string& method, const Args& args) const {
  RRef rref(state_);
  return agent_of(*rref.state(), "remote").remote_method(rref, method, args, timeout_);
}

}  // namespace braid::rpc
