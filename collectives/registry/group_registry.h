// The process-group registry ("world"): torch.distributed's init_process_group / new_group / get_rank
// layer. It owns the default group ("world") and every group made with new_group, remembers which global
// ranks each group holds, and offers the module-level collectives that accept "not a member" handles.
//
// Groups are made through create_process_group (collectives/registry/engine_factory.h) or a factory registered
// with register_backend, with BackendOptions{group rank, size, unique name, a PrefixStore named after the
// group, global ranks of the members}.
//
// Collective creation. new_group is called by every rank of the default group, in the same
// order, with the same ranks; members get a real group, the others a NonMemberProcessGroup handle, and
// all ranks then meet in a store-based barrier. Two exceptions keep the call local to the members:
//   * use_local_synchronization: only members call; a non-member gets kNonGroupMember (nullptr);
//   * a one-rank group needs nobody else: new_group({r}) creates it on rank r without any barrier, so
//     every rank may create its own (MixtureOfExperts); other ranks calling it get a non-member handle.
//     (In a one-rank world every group is an ordinary all-rank group, "group-N".)
// Names are unique even for groups with identical members: "group-N" counts every rank's all-ranks
// calls, "local-<ranks>-K" and "solo-<rank>-K" count this process's calls for that member list (the same
// on every member, because members create the groups of one list in the same order).
//
// Stores: the default store is the one given or made by the init method. All keys braid writes go
// under "braid/<incarnation>/", where the incarnation counts init_process_group calls on that store,
// so that a store reused after destroy_process_group never serves stale group addresses.
//
// Group arguments: std::nullopt means the default group; a null pointer is kNonGroupMember (what a
// non-member gets from a local-synchronization new_group).
//
// Lifetime: the registry lives until the process exits; call destroy_process_group() before exiting for a
// clean shutdown (groups left registered are not destroyed at exit).
//
// Thread-safety: every function may be called from any thread. new_group and the collectives must be
// issued in the same order on every rank (as with torch).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectives/registry/engine_factory.h"
#include "collectives/core/process_group.h"
#include "store/store.h"

namespace braid::collectives {

using GroupPtr = std::shared_ptr<ProcessGroup>;
using GroupArg = std::optional<GroupPtr>;

// What a non-member gets from new_group(..., use_local_synchronization = true).
inline const GroupPtr kNonGroupMember = nullptr;

// Engine options of a group (torch's pg_options plus the timeout).
struct GroupOptions {
  Millis timeout = kDefaultCollectiveTimeout;
  int threads = 2;                   // gloo worker lanes
  std::vector<std::string> devices;  // gloo interfaces (empty: the interface toward the store's host, "lo" on one host)
  int cuda_device = -1;              // nccl (-1: local rank modulo the device count)
  std::optional<Millis> stall_warn;  // the stall watchdog (unset: BRAID_STALL_WARN_S, else 60 s; 0: off)
};

struct InitOptions {
  // env://, tcp://host:port or file:///path (store/rendezvous.h). Empty: env://, except under mpirun
  // without MASTER_ADDR, where the store comes from MPI (collectives/mpi/mpi_bootstrap.h).
  std::string init_method;
  // An existing store shared by every rank; then rank and world_size are required.
  std::shared_ptr<store::Store> store;
  int rank = -1;        // -1: from the init method or the environment
  int world_size = -1;  // -1: from the init method or the environment
  GroupOptions group;   // the default group's options; the timeout also bounds the rendezvous
};

struct NewGroupOptions {
  std::string backend;                     // empty: the default group's backend
  std::optional<GroupOptions> pg_options;  // unset: the default group's options
  bool use_local_synchronization = false;
};

// ---- Life cycle ----

// Creates the default group "world" over every rank and waits until every rank has created it.
// Throws InvalidArgument when already initialized or on bad options; TimeoutError when ranks are missing.
void init_process_group(const std::string& backend, const InitOptions& options = {});
bool is_initialized();
// The default group and store, and the default group's backend; throw InvalidArgument before init.
GroupPtr default_group();
std::shared_ptr<store::Store> default_store();
std::string default_backend();

// Members get a new group over `ranks` (global ranks, any order; group rank = index in the sorted list;
// empty = every rank). See the header comment for who must call and what non-members get.
GroupPtr new_group(std::vector<int> ranks = {}, const NewGroupOptions& options = {});
// Splits the world into consecutive groups of `group_size` ranks (group_size must divide the world
// size). Returns this rank's subgroup and all of them (with non-member handles for the others).
std::pair<GroupPtr, std::vector<GroupPtr>> new_subgroups(int group_size, const NewGroupOptions& options = {});

// Without a group (or with the default group): forgets every group, newest first, and uninitializes.
// With a group: forgets that one. kNonGroupMember is ignored. A group shuts down (its threads are
// joined) when its last reference goes; references the caller still holds keep it alive until then.
void destroy_process_group(const GroupArg& group = std::nullopt);

// ---- Membership ----

// This rank in `group`; -1 for a non-member. A group that was not made here answers for itself.
int get_rank(const GroupArg& group = std::nullopt);
// The size of `group`; -1 for a non-member.
int get_world_size(const GroupArg& group = std::nullopt);
// Throw InvalidArgument "... not registered ..." for a group not made by this registry and
// "... not part of group ..." for a rank outside it.
int get_group_rank(const GroupPtr& group, int global_rank);
int get_global_rank(const GroupPtr& group, int group_rank);
std::vector<int> get_process_group_ranks(const GroupPtr& group);
std::string get_backend(const GroupArg& group = std::nullopt);
// The sequence number of the last op issued on `group` (torch's _get_sequence_number_for_group).
uint64_t get_sequence_number_for_group(const GroupArg& group = std::nullopt);

// The group a module-level collective runs on: the default group when `group` is unset, nullptr when this
// rank is not a member (after warning once per op, as torch's _warn_not_in_group).
GroupPtr group_for_op(const GroupArg& group, const char* op);

// ---- Module-level collectives (module_collectives.cc) ----
// On a non-member handle (or kNonGroupMember) these log a warning once per op, "Running <op> on global
// rank R which does not belong to the given group ...", and return nullptr without communicating.
// Otherwise they return the Work, already waited for unless async_op.

std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM,
                                 const GroupArg& group = std::nullopt, bool async_op = false);
// tensor_list must hold get_world_size(group) tensors of tensor's dtype ("tensors with different
// dtypes" otherwise); tensor_list[r] receives group rank r's tensor.
std::shared_ptr<Work> all_gather(const std::vector<Tensor>& tensor_list, const Tensor& tensor,
                                 const GroupArg& group = std::nullopt, bool async_op = false);
// `src` is a global rank (as in torch), translated to its rank in `group`.
std::shared_ptr<Work> broadcast(const Tensor& tensor, int src, const GroupArg& group = std::nullopt,
                                bool async_op = false);
std::shared_ptr<Work> barrier(const GroupArg& group = std::nullopt, bool async_op = false);

// ---- Extra backends ----

// Makes `name` usable in init_process_group / new_group, ahead of the built-in engines (torch's
// Backend.register_backend); tests use it for in-process engines. Registrations survive destroy.
using BackendFactory = std::function<GroupPtr(const BackendOptions&)>;
void register_backend(const std::string& name, BackendFactory factory);

}  // namespace braid::collectives
