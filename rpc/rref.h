// RRef: a reference to a value that lives on one worker (its owner), usable from any worker.
//
// An RRef handle is cheap to copy (a shared pointer to its state). The owner holds the value; other
// workers hold users. Passing an RRef in an RPC's arguments or results forks it: the receiver gets its own
// user, and the reference-counting protocol (docs/RPC.md, rpc/rref_context.h) keeps the owner's value alive
// exactly while some user exists, deleting it after the last one is gone.
//
//   owner(), owner_name(), is_owner()   where the value lives
//   local_value()                       the value itself; only on the owner (elsewhere InvalidArgument)
//   to_here(timeout)                    a copy of the value, fetched from the owner (the value on the owner)
//   confirmed_by_owner()                whether the owner knows about this user yet
//   rpc_sync().call("m", args)          calls method m of the owner's object there and waits
//   rpc_async().call("m", args)         the same, returning a Future
//   remote().call("m", args)            the same, keeping the result on the owner as a new RRef
//
// Methods throw InvalidArgument on a null handle. Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/future.h"

namespace braid::rpc {

class Value;
struct Args;
class RRefState;

// A worker as the agent knows it: its unique name and its id (the rank given to init_rpc).
struct WorkerInfo {
  std::string name;
  int id = -1;
  bool operator==(const WorkerInfo& o) const { return id == o.id && name == o.name; }
};

// Globally unique within a job: the worker that made it and a counter there.
struct GloballyUniqueId {
  int32_t creator = -1;
  uint64_t local_id = 0;
  bool operator==(const GloballyUniqueId& o) const { return creator == o.creator && local_id == o.local_id; }
  bool operator<(const GloballyUniqueId& o) const {
    return creator != o.creator ? creator < o.creator : local_id < o.local_id;
  }
  std::string to_string() const;  // "(creator, local_id)"
};
using RRefId = GloballyUniqueId;
using ForkId = GloballyUniqueId;

using Millis = std::chrono::milliseconds;

class RRef;

// The proxies returned by rref.rpc_sync() / rpc_async() / remote(): method calls on the owner's object.
class RRefSyncProxy {
 public:
  RRefSyncProxy(std::shared_ptr<RRefState> s, Millis timeout) : state_(std::move(s)), timeout_(timeout) {}
  Value call(const std::string& method, const Args& args) const;

 private:
  std::shared_ptr<RRefState> state_;
  Millis timeout_;
};
class RRefAsyncProxy {
 public:
  RRefAsyncProxy(std::shared_ptr<RRefState> s, Millis timeout) : state_(std::move(s)), timeout_(timeout) {}
  Future<Value> call(const std::string& method, const Args& args) const;

 private:
  std::shared_ptr<RRefState> state_;
  Millis timeout_;
};
class RRefRemoteProxy {
 public:
  RRefRemoteProxy(std::shared_ptr<RRefState> s, Millis timeout) : state_(std::move(s)), timeout_(timeout) {}
  RRef call(const std::string& method, const Args& args) const;

 private:
  std::shared_ptr<RRefState> state_;
  Millis timeout_;
};

// Millis{0} as a timeout means the agent's default rpc_timeout.
inline constexpr Millis kUseDefaultTimeout{0};

class RRef {
 public:
  RRef() = default;
  explicit RRef(std::shared_ptr<RRefState> state) : state_(std::move(state)) {}

  // Wraps a local value as an RRef owned by this worker (needs a running agent).
  static RRef local(Value value);

  bool defined() const { return state_ != nullptr; }
  WorkerInfo owner() const;
  const std::string& owner_name() const;
  bool is_owner() const;
  // The value; InvalidArgument unless this worker is the owner. Blocks (up to the agent's default
  // timeout) while the owner's value is still being created by a remote() call.
  Value local_value() const;
  Value to_here(Millis timeout = kUseDefaultTimeout) const;
  bool confirmed_by_owner() const;
  RRefId rref_id() const;
  ForkId fork_id() const;
  std::string describe() const;  // "RRef(owner=worker1, id=(0, 3), fork=(2, 7))"

  RRefSyncProxy rpc_sync(Millis timeout = kUseDefaultTimeout) const;
  RRefAsyncProxy rpc_async(Millis timeout = kUseDefaultTimeout) const;
  RRefRemoteProxy remote(Millis timeout = kUseDefaultTimeout) const;

  const std::shared_ptr<RRefState>& state() const { return state_; }
  bool same_as(const RRef& o) const { return state_ == o.state_; }

 private:
  const RRefState& checked() const;
  std::shared_ptr<RRefState> state_;
};

}  // namespace braid::rpc
