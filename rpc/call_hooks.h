// CallHooks: how a layer above RPC rides on calls without RPC knowing it. Distributed autograd
// (dist_autograd/rpc_hooks.cc) is the one user: it attaches its context id to every call made inside a
// context, records a send function for the tensors that require grad, and on the other side a receive
// function, for requests and their replies alike.
//
// The agent calls the hooks at four points:
//   on_send_request     on the calling thread, for every kCall, kRemoteCall and kRRefFetch it sends;
//   on_receive_request  on the serving thread, before the request's arguments are decoded; the returned
//                       IncomingCall is entered while the called function runs (its synchronous part) and
//                       asked for the reply's extension;
//   IncomingCall::on_send_reply   before the reply of that request is encoded onto the wire;
//   on_receive_reply    on the receiving thread, before a reply that carries an extension is decoded.
// Each may read and change the message's tensors and requires_grad flags and sets Message::ext. A hook
// that throws fails the call it was running for (on the caller: the call throws; on the callee: the
// caller gets the error as a RemoteError).
#pragma once

#include <memory>

#include "rpc/message.h"

namespace braid::rpc {

class IncomingCall {
 public:
  virtual ~IncomingCall() = default;
  // Active on the current thread while the request's function runs; restores the previous state when
  // destroyed.
  virtual std::shared_ptr<void> enter() = 0;
  // Before `reply` (the result of this request) goes back to `peer`.
  virtual void on_send_reply(int peer, Message& reply) = 0;
};

class CallHooks {
 public:
  virtual ~CallHooks() = default;
  virtual void on_send_request(int peer, Message& request) = 0;
  // Null when the request carries nothing for the hooks (empty extension).
  virtual std::shared_ptr<IncomingCall> on_receive_request(int peer, Message& request) = 0;
  virtual void on_receive_reply(int peer, Message& reply) = 0;
};

// Installs the process's hooks (once; later calls with the same object are no-ops, another object is an
// error). The object must outlive every agent: hooks are installed for the life of the process.
void install_call_hooks(CallHooks* hooks);
// The installed hooks, or null.
CallHooks* call_hooks();

}  // namespace braid::rpc
