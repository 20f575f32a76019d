#include "rpc/rref_context.h"

#include <fmt/format.h>

#include "base/check.h"
#include "base/logging.h"
#include "rpc/agent.h"

namespace braid::rpc {

namespace {

std::vector<uint8_t> id_meta(std::initializer_list<GloballyUniqueId> ids) {
  std::vector<uint8_t> meta;
  MetaWriter w(meta);
  for (const auto& id : ids) w.id(id);
  return meta;
}

// RRef control messages must outlive ordinary calls: a delete that times out leaks a value.
constexpr Millis kControlTimeout{10 * 60 * 1000};

}  // namespace

std::string GloballyUniqueId::to_string() const { return fmt::format("({}, {})", creator, local_id); }

// ---- RRefState

RRefState::RRefState(std::shared_ptr<RRefContext> c, WorkerInfo o, std::shared_ptr<OwnerValue> value)
    : ctx(std::move(c)), owner(std::move(o)), rref_id(value->id), fork_id(value->id), is_owner(true),
      owner_value(std::move(value)) {}

RRefState::RRefState(std::shared_ptr<RRefContext> c, WorkerInfo o, RRefId id, ForkId fork, bool confirmed)
    : ctx(std::move(c)), owner(std::move(o)), rref_id(id), fork_id(fork), is_owner(false) {
  confirmed_.store(confirmed);
}

RRefState::~RRefState() {
  if (!is_owner) ctx->on_user_destroyed(*this);
}

void RRefState::set_creation_error(std::exception_ptr e) {
  std::lock_guard<std::mutex> lock(mu_);
  creation_error_ = std::move(e);
}

std::exception_ptr RRefState::creation_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return creation_error_;
}

// ---- RRefContext

RRefContext::RRefContext(RpcAgent* agent, WorkerInfo self) : agent_(agent), self_(std::move(self)) {}

RpcAgent* RRefContext::agent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return agent_;
}

void RRefContext::detach_agent() {
  std::lock_guard<std::mutex> lock(mu_);
  agent_ = nullptr;
}

RRefId RRefContext::new_id() { return RRefId{self_.id, next_id_.fetch_add(1)}; }

RRef RRefContext::make_owner(Value value) {
  auto ov = std::make_shared<OwnerValue>();
  ov->id = new_id();
  ov->value.set_value(std::move(value));
  return RRef(std::make_shared<RRefState>(shared_from_this(), self_, std::move(ov)));
}

RRef RRefContext::make_owner_handle(std::shared_ptr<OwnerValue> value) {
  return RRef(std::make_shared<RRefState>(shared_from_this(), self_, std::move(value)));
}

RRef RRefContext::make_creator_user(const WorkerInfo& owner, RRefId id) {
  auto state = std::make_shared<RRefState>(shared_from_this(), owner, id, id, false);
  std::lock_guard<std::mutex> lock(mu_);
  users_[id] = UserRecord{state, owner, id, false, false};
  return RRef(std::move(state));
}

std::shared_ptr<OwnerValue> RRefContext::owner_entry(RRefId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& owned = owners_[id];
  if (!owned.value) {
    owned.value = std::make_shared<OwnerValue>();
    owned.value->id = id;
  }
  return owned.value;
}

std::shared_ptr<OwnerValue> RRefContext::find_owner(RRefId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = owners_.find(id);
  return it == owners_.end() ? nullptr : it->second.value;
}

void RRefContext::add_fork(RRefId id, ForkId fork) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& owned = owners_[id];
  if (!owned.value) {
    owned.value = std::make_shared<OwnerValue>();
    owned.value->id = id;
  }
  owned.forks.insert(fork);
}

void RRefContext::delete_fork(RRefId id, ForkId fork) {
  std::shared_ptr<OwnerValue> released;  // destroyed outside the lock: the value may be a big object
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = owners_.find(id);
    if (it == owners_.end() || it->second.forks.erase(fork) == 0) {
      logging::get("braid.rpc")->warn("{}: delete of unknown fork {} of RRef {}", self_.name, fork.to_string(),
                                      id.to_string());
      return;
    }
    if (it->second.forks.empty()) {
      released = std::move(it->second.value);
      owners_.erase(it);
    }
  }
}

RRefForkData RRefContext::fork_for(const RRef& rref, int dst) {
  const auto& s = rref.state();
  BRAID_CHECK_ARG(s->ctx.get() == this, "rpc: {} belongs to another RPC agent", rref.describe());
  if (auto err = s->creation_error()) std::rethrow_exception(err);
  RRefForkData fd;
  fd.owner = s->owner.id;
  fd.rref_id = s->rref_id;
  fd.parent = self_.id;
  fd.fork_id = new_id();
  std::lock_guard<std::mutex> lock(mu_);
  if (s->is_owner && dst == self_.id) {
    self_forks_[fd.fork_id] = s->owner_value;
  } else if (s->is_owner) {
    auto& owned = owners_[s->rref_id];
    if (!owned.value) owned.value = s->owner_value;
    owned.forks.insert(fd.fork_id);
  } else {
    pending_children_[fd.fork_id] = s;
  }
  return fd;
}

RRef RRefContext::on_fork_received(const RRefForkData& fd, int sender) {
  RpcAgent* agent = this->agent();
  BRAID_CHECK_TYPED(CommError, agent != nullptr, "rpc: {} received an RRef after shutdown", self_.name);
  if (fd.owner == self_.id) {
    std::shared_ptr<OwnerValue> ov;
    if (fd.parent == self_.id) {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = self_forks_.find(fd.fork_id); it != self_forks_.end()) {
        ov = std::move(it->second);
        self_forks_.erase(it);
      }
    }
    if (!ov) ov = find_owner(fd.rref_id);
    BRAID_CHECK_TYPED(WireError, ov != nullptr, "rpc: {} received RRef {} that it should own but does not know",
                      self_.name, fd.rref_id.to_string());
    if (fd.parent != self_.id) {
      // The sender (a user) keeps its fork until we accept the child; the handle here is the owner's.
      agent->send_request(fd.parent, MessageType::kRRefChildAccept, id_meta({fd.fork_id}), {}, kControlTimeout,
                          "rref child accept", [](Message*, std::exception_ptr) {});
    }
    return RRef(std::make_shared<RRefState>(shared_from_this(), self_, std::move(ov)));
  }
  const WorkerInfo& owner = agent->worker(fd.owner);
  const bool from_owner = fd.parent == fd.owner;
  auto state = std::make_shared<RRefState>(shared_from_this(), owner, fd.rref_id, fd.fork_id, from_owner);
  {
    std::lock_guard<std::mutex> lock(mu_);
    users_[fd.fork_id] = UserRecord{state, owner, fd.rref_id, from_owner, false};
  }
  if (!from_owner) {
    const int parent = fd.parent;
    const ForkId fork = fd.fork_id;
    auto self = shared_from_this();
    agent->send_request(fd.owner, MessageType::kRRefForkRequest, id_meta({fd.rref_id, fd.fork_id}), {},
                        kControlTimeout, "rref fork request",
                        [self, parent, fork](Message*, std::exception_ptr error) {
                          self->on_fork_confirmed_id(fork, parent, error);
                        });
  }
  (void)sender;
  return RRef(std::move(state));
}

void RRefContext::on_fork_confirmed_id(ForkId fork, int parent, std::exception_ptr error) {
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      logging::get("braid.rpc")->error("{}: the owner did not confirm fork {}: {}", self_.name, fork.to_string(),
                                       e.what());
    }
  }
  confirm_fork(fork);
  if (RpcAgent* agent = this->agent(); agent != nullptr && !error) {
    agent->send_request(parent, MessageType::kRRefChildAccept, id_meta({fork}), {}, kControlTimeout,
                        "rref child accept", [](Message*, std::exception_ptr) {});
  }
}

void RRefContext::on_creation_confirmed(const std::shared_ptr<RRefState>& user, std::exception_ptr error) {
  if (error) user->set_creation_error(error);
  confirm_fork(user->fork_id);
}

void RRefContext::confirm_fork(ForkId fork) {
  WorkerInfo owner;
  RRefId id;
  bool send = false;
  std::shared_ptr<RRefState> state;  // released after the lock: ~RRefState locks mu_
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = users_.find(fork);
    if (it == users_.end()) return;
    it->second.confirmed = true;
    state = it->second.state.lock();
    if (state) state->set_confirmed();
    if (it->second.destroyed) {
      owner = it->second.owner;
      id = it->second.id;
      users_.erase(it);
      send = true;
    }
  }
  if (send) send_delete(owner, id, fork);
}

void RRefContext::on_child_accepted(ForkId fork) {
  std::shared_ptr<RRefState> released;  // may run ~RRefState (which locks mu_): release outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_children_.find(fork);
  if (it == pending_children_.end()) return;
  released = std::move(it->second);
  pending_children_.erase(it);
}

void RRefContext::on_user_destroyed(const RRefState& user) {
  WorkerInfo owner;
  RRefId id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = users_.find(user.fork_id);
    if (it == users_.end()) return;  // released by shutdown already
    if (!it->second.confirmed) {
      it->second.destroyed = true;
      return;
    }
    owner = it->second.owner;
    id = it->second.id;
    users_.erase(it);
  }
  send_delete(owner, id, user.fork_id);
}

void RRefContext::send_delete(const WorkerInfo& owner, RRefId id, ForkId fork) {
  RpcAgent* agent = this->agent();
  if (agent == nullptr) return;  // after shutdown the owners are gone too
  agent->send_request(owner.id, MessageType::kRRefUserDelete, id_meta({id, fork}), {}, kControlTimeout,
                      "rref user delete", [](Message*, std::exception_ptr) {});
}

size_t RRefContext::release_all_users() {
  std::vector<std::tuple<WorkerInfo, RRefId, ForkId>> deletes;
  size_t released = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = users_.begin(); it != users_.end();) {
      if (it->second.destroyed) {
        ++it;  // already waiting for its confirmation
        continue;
      }
      ++released;
      if (!it->second.confirmed) {
        it->second.destroyed = true;
        ++it;
        continue;
      }
      deletes.emplace_back(it->second.owner, it->second.id, it->first);
      it = users_.erase(it);
    }
  }
  for (const auto& [owner, id, fork] : deletes) send_delete(owner, id, fork);
  return released;
}

bool RRefContext::quiescent() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!pending_children_.empty()) return false;
  for (const auto& [fork, u] : users_) {
    if (!u.confirmed) return false;
  }
  return true;
}

RRefCounts RRefContext::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  RRefCounts c;
  c.owned = owners_.size();
  for (const auto& [id, o] : owners_) c.forks += o.forks.size();
  for (const auto& [fork, u] : users_) {
    if (!u.destroyed) ++c.users;
    if (!u.confirmed) ++c.unconfirmed;
  }
  c.pending_children = pending_children_.size();
  return c;
}

}  // namespace braid::rpc
