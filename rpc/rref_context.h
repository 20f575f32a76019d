// The RRef reference-counting protocol of one worker (docs/RPC.md "RRef protocol"), after PyTorch's.
//
// The owner keeps each value it owns in `owners_` together with the set of forks (users elsewhere) that
// it knows about; the entry goes away when the last fork is deleted, and the value with it unless a local
// handle on the owner still holds it. A user is an RRefState on another worker with its own fork id.
//
//   remote(to=O)              the caller makes user U (fork id = rref id) and sends kRemoteCall; O adds
//                             U's fork while creating the value and replies: U is confirmed.
//   O sends its RRef to B     O adds B's new fork before sending; B's user is confirmed at once.
//   user A sends it to B      A keeps its own user alive as a pending child under the new fork id F and
//                             sends the fork; B asks O to add F (kRRefForkRequest); when O replies, B is
//                             confirmed and tells A (kRRefChildAccept), which releases the pending child.
//   user A sends it to O      O hands out its own handle and tells A (kRRefChildAccept).
//   a user is destroyed       once confirmed, it sends kRRefUserDelete(F) to O; an unconfirmed user's
//                             delete waits for its confirmation.
//
// Because the parent holds its fork until the child is counted, the owner's count can never reach zero
// while a fork is in flight. Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "base/future.h"
#include "rpc/rref.h"
#include "rpc/value.h"
#include "rpc/value_codec.h"

namespace braid::rpc {

class RpcAgent;
class RRefContext;

// An owner's value: pending while a remote() call is still creating it.
struct OwnerValue {
  RRefId id;
  Future<Value> value{"rref value"};
};

class RRefState {
 public:
  // An owner handle.
  RRefState(std::shared_ptr<RRefContext> ctx, WorkerInfo owner, std::shared_ptr<OwnerValue> value);
  // A user handle.
  RRefState(std::shared_ptr<RRefContext> ctx, WorkerInfo owner, RRefId id, ForkId fork, bool confirmed);
  ~RRefState();
  RRefState(const RRefState&) = delete;
  RRefState& operator=(const RRefState&) = delete;

  const std::shared_ptr<RRefContext> ctx;
  const WorkerInfo owner;
  const RRefId rref_id;
  const ForkId fork_id;
  const bool is_owner;
  const std::shared_ptr<OwnerValue> owner_value;  // owner handles only

  bool confirmed() const { return is_owner || confirmed_.load(std::memory_order_acquire); }
  void set_confirmed() { confirmed_.store(true, std::memory_order_release); }
  // A failed remote() creation, reported to the user that made it; to_here and calls rethrow it.
  void set_creation_error(std::exception_ptr e);
  std::exception_ptr creation_error() const;

 private:
  std::atomic<bool> confirmed_{false};
  mutable std::mutex mu_;
  std::exception_ptr creation_error_;  // GUARDED_BY(mu_)
};

struct RRefCounts {
  size_t owned = 0;             // values this worker owns that some fork still references
  size_t forks = 0;             // forks counted over all owned values
  size_t users = 0;             // live user handles on this worker
  size_t pending_children = 0;  // forks sent by this worker's users and not yet accepted
  size_t unconfirmed = 0;       // users the owner has not confirmed yet
};

class RRefContext : public std::enable_shared_from_this<RRefContext> {
 public:
  RRefContext(RpcAgent* agent, WorkerInfo self);

  const WorkerInfo& self() const { return self_; }
  // The agent, or nullptr once it has shut down (handles may outlive it).
  RpcAgent* agent() const;
  void detach_agent();

  RRefId new_id();

  // A local value as an owner RRef (RRef::local, remote() to self).
  RRef make_owner(Value value);
  // An owner handle on `value` (a remote() to self keeps its value out of owners_ until it is forked).
  RRef make_owner_handle(std::shared_ptr<OwnerValue> value);
  // The user made by remote(): fork id = rref id, confirmed by the kRemoteCall reply.
  RRef make_creator_user(const WorkerInfo& owner, RRefId id);

  // Owner side. The entry for `id` (created pending when a fork request beats the kRemoteCall).
  std::shared_ptr<OwnerValue> owner_entry(RRefId id);
  // nullptr when this worker owns no such value.
  std::shared_ptr<OwnerValue> find_owner(RRefId id) const;
  void add_fork(RRefId id, ForkId fork);
  void delete_fork(RRefId id, ForkId fork);

  // Sending `rref` to worker `dst`: the fork data to encode (see the protocol above).
  RRefForkData fork_for(const RRef& rref, int dst);
  // Receiving fork data from `sender`: this worker's handle.
  RRef on_fork_received(const RRefForkData& fd, int sender);
  // The creator user of remote() was answered.
  void on_creation_confirmed(const std::shared_ptr<RRefState>& user, std::exception_ptr error);
  void on_child_accepted(ForkId fork);
  // Called by ~RRefState of a user.
  void on_user_destroyed(const RRefState& user);

  // Graceful shutdown: deletes every live user (as if destroyed) and reports how many it released.
  size_t release_all_users();
  // Whether every fork protocol exchange this worker started has finished.
  bool quiescent() const;
  RRefCounts counts() const;

 private:
  void send_delete(const WorkerInfo& owner, RRefId id, ForkId fork);
  void on_fork_confirmed_id(ForkId fork, int parent, std::exception_ptr error);
  void confirm_fork(ForkId fork);

  mutable std::mutex mu_;
  RpcAgent* agent_;  // GUARDED_BY(mu_)
  const WorkerInfo self_;
  std::atomic<uint64_t> next_id_{1};
  struct Owned {
    std::shared_ptr<OwnerValue> value;
    std::set<ForkId> forks;
  };
  std::map<RRefId, Owned> owners_;                                // GUARDED_BY(mu_)
  std::map<ForkId, std::shared_ptr<RRefState>> pending_children_;  // GUARDED_BY(mu_)
  // Owner handles this worker passed to a call to itself, by the fork id they travel under, until that
  // call's decoding takes them. An owner that made its value with remote() to itself has no entry in
  // owners_ (no user exists), so the value must ride along; the caller may drop its handle meanwhile.
  std::map<ForkId, std::shared_ptr<OwnerValue>> self_forks_;        // GUARDED_BY(mu_)
  struct UserRecord {
    std::weak_ptr<RRefState> state;
    WorkerInfo owner;
    RRefId id;
    bool confirmed = false;
    bool destroyed = false;  // destroyed (or released) before its confirmation: delete on confirmation
  };
  std::map<ForkId, UserRecord> users_;  // GUARDED_BY(mu_)
};

}  // namespace braid::rpc
