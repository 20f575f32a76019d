#include "collectives/registry/group_registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "base/check.h"
#include "base/logging.h"
#include "base/env.h"
#include "collectives/registry/non_member.h"
#include "collectives/mpi/mpi_bootstrap.h"
#include "store/prefix_store.h"
#include "store/rendezvous.h"
#include "store/tcp_store.h"

namespace braid::collectives {
namespace {

// What the registry knows about one group.
struct Entry {
  GroupPtr group;
  std::string backend;
  std::vector<int> ranks;  // global ranks, in group-rank order (sorted)
  bool member = true;
};

// The process-wide registry. Blocking work (rendezvous, engine creation, barriers) happens outside `mu`,
// so that membership queries from other threads never wait behind a slow peer.
struct World {
  std::mutex mu;
  enum class State { kEmpty, kInitializing, kReady } state = State::kEmpty;
  int rank = -1;
  int size = 0;
  std::string backend;
  GroupOptions options;
  std::shared_ptr<store::Store> store;  // as given or made by the init method
  std::shared_ptr<store::Store> scope;  // "braid/<incarnation>/" over `store`
  uint64_t incarnation = 0;
  std::vector<Entry> entries;  // creation order; entries[0] is the default group
  uint64_t group_count = 0;    // new_group calls that every rank makes
  std::map<std::vector<int>, uint64_t> local_counts;  // local and one-rank groups, per member list
  std::set<std::string> warned_ops;
  std::map<std::string, BackendFactory> factories;  // kept across destroy
};

// Never destroyed: at exit, engine destructors could otherwise run after their libraries shut down
// (MPI finalizes in an exit handler). Programs that want a clean shutdown call destroy_process_group().
World& world() {
  static World* w = new World;
  return *w;
}

// The longest a rank that serves the store waits in destroy_process_group for the others to arrive.
constexpr Millis kMaxLeaveWait{10'000};

// destroy_process_group of the default group: every rank checks out through the store, and the rank whose
// process serves it (a TCPStore master: rank 0 under env:// and mpirun) waits until all have, so that it
// does not exit while another rank still waits for a reply of the store (the last barrier of new_group,
// say: the README's quick start failed 6 times in 10 at 3 ranks). Bounded: a rank that never destroys
// costs the server at most kMaxLeaveWait and a warning, never an error.
void leave_store(store::Store& store, store::Store& scope, int rank, int size, Millis timeout) {
  try {
    if (scope.add("destroy/left", 1) == size) scope.set("destroy/all_left", "1");
    const auto* tcp = dynamic_cast<const store::TCPStore*>(&store);
    if (tcp == nullptr || !tcp->hosts_server()) return;
    scope.wait({"destroy/all_left"}, timeout);
  } catch (const std::exception& e) {
    logging::get("braid.coll")
        ->warn("destroy_process_group (rank {}/{}): not every rank checked out of the store before this one, which "
               "serves it, went on: {}", rank, size, e.what());
  }
}

// A copy of what new_group needs, taken under the lock.
struct Snapshot {
  int rank;
  int size;
  std::string backend;
  GroupOptions options;
  std::shared_ptr<store::Store> scope;
  uint64_t incarnation;
};

constexpr const char* kNotInitialized =
    "Default process group has not been initialized, please make sure to call init_process_group";

void require_ready_locked(const World& w, const char* what) {
  BRAID_CHECK_ARG(w.state == World::State::kReady, "{}: {}", what, kNotInitialized);
}

Snapshot snapshot(const char* what) {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  require_ready_locked(w, what);
  return {w.rank, w.size, w.backend, w.options, w.scope, w.incarnation};
}

const Entry* find_locked(const World& w, const ProcessGroup* group) {
  for (const auto& e : w.entries) {
    if (e.group.get() == group) return &e;
  }
  return nullptr;
}

[[noreturn]] void throw_not_registered(const char* what, const GroupPtr& group) {
  BRAID_THROW(InvalidArgument, "{}: Group '{}' is not registered, please create group with new_group", what,
              group ? group->name() : std::string("NON_GROUP_MEMBER"));
}

// A copy of the entry of `group`; throws "not registered".
Entry registered(const char* what, const GroupPtr& group) {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  require_ready_locked(w, what);
  const Entry* e = group ? find_locked(w, group.get()) : nullptr;
  if (e == nullptr) throw_not_registered(what, group);
  return *e;
}

GroupPtr make_group(const std::string& backend, const BackendOptions& options) {
  BackendFactory factory;
  {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    if (auto it = w.factories.find(backend); it != w.factories.end()) factory = it->second;
  }
  GroupPtr group = factory ? factory(options) : create_process_group(backend, options);
  BRAID_ASSERT(group != nullptr, "backend '{}' returned no group for '{}'", backend, options.group_name);
  return group;
}

BackendOptions backend_options(int group_rank, const std::vector<int>& members, const std::string& name,
                               const std::shared_ptr<store::Store>& scope, const GroupOptions& o) {
  BackendOptions b;
  b.rank = group_rank;
  b.size = static_cast<int>(members.size());
  b.group_name = name;
  b.store = std::make_shared<store::PrefixStore>(name, scope);
  b.timeout = o.timeout;
  b.global_ranks = members;
  b.threads = o.threads;
  b.devices = o.devices;
  b.cuda_device = o.cuda_device;
  b.stall_warn = o.stall_warn;
  return b;
}

// torch's _store_based_barrier: every participant marks its arrival under the group's name and waits
// for the others' marks. One key per participant (instead of a counter) lets a timeout name who is late.
void store_barrier(store::Store& scope, const std::string& name, const std::vector<int>& participants, int index,
                   Millis timeout) {
  const auto key = [&](size_t i) { return fmt::format("barrier/{}/{}", name, i); };
  scope.set(key(static_cast<size_t>(index)), std::string_view("1"));
  std::vector<std::string> keys;
  keys.reserve(participants.size());
  for (size_t i = 0; i < participants.size(); ++i) keys.push_back(key(i));
  try {
    scope.wait(keys, timeout);
  } catch (const TimeoutError&) {
    std::vector<int> missing;
    for (size_t i = 0; i < participants.size(); ++i) {
      if (!scope.check({keys[i]})) missing.push_back(participants[i]);
    }
    BRAID_THROW(TimeoutError,
                "Timed out initializing process group in store based barrier on rank {}, for group '{}' "
                "({} of {} ranks arrived within {} ms; missing ranks: [{}])",
                participants[static_cast<size_t>(index)], name, participants.size() - missing.size(),
                participants.size(), timeout.count(), fmt::join(missing, ", "));
  }
}

std::vector<int> iota_ranks(int n) {
  std::vector<int> r(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) r[static_cast<size_t>(i)] = i;
  return r;
}

// "0_2_5" for short lists; long lists get their length and a hash so that names stay short.
std::string list_tag(const std::vector<int>& ranks) {
  if (ranks.size() <= 8) return fmt::format("{}", fmt::join(ranks, "_"));
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (int r : ranks) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(r));
    h *= 1099511628211ull;
  }
  return fmt::format("n{}x{:016x}", ranks.size(), h);
}

}  // namespace

void init_process_group(const std::string& backend, const InitOptions& options) {
  World& w = world();
  {
    std::lock_guard<std::mutex> lock(w.mu);
    BRAID_CHECK_ARG(w.state == World::State::kEmpty,
                    "init_process_group: trying to initialize the default process group twice!");
    w.state = World::State::kInitializing;
  }
  try {
    const Millis timeout = options.group.timeout;
    store::Rendezvous rdv;
    if (options.store) {
      BRAID_CHECK_ARG(options.init_method.empty(), "init_process_group: Cannot specify both init_method and store.");
      BRAID_CHECK_ARG(options.world_size > 0, "init_process_group: world_size must be positive if using store, got {}",
                      options.world_size);
      BRAID_CHECK_ARG(options.rank >= 0, "init_process_group: rank must be non-negative if using store, got {}",
                      options.rank);
      rdv = {options.store, options.rank, options.world_size};
    } else if (options.init_method.empty() && !env::get("MASTER_ADDR") && store::detect_launch().launcher == "mpi") {
      // Started by mpirun without torchrun-style variables: MPI itself tells the ranks where the store is.
      const auto launch = store::detect_launch();
      rdv = {mpi::mpi_bootstrap_store(timeout), options.rank >= 0 ? options.rank : launch.rank,
             options.world_size > 0 ? options.world_size : launch.world_size};
    } else {
      rdv = store::rendezvous(options.init_method.empty() ? "env://" : options.init_method, options.rank,
                              options.world_size, timeout);
    }
    BRAID_CHECK_ARG(rdv.world_size > 0 && rdv.rank >= 0 && rdv.rank < rdv.world_size,
                    "init_process_group: rank {} is out of range for world size {}", rdv.rank, rdv.world_size);
    // Every rank adds 1 per init on this store, so the k-th init of a world of n ranks reads a value
    // in (k*n, (k+1)*n] on every rank (the previous init's barrier finished before anyone re-adds).
    const auto joins = rdv.store->add("braid/inits", 1);
    const auto incarnation = static_cast<uint64_t>((joins - 1) / rdv.world_size);
    auto scope = std::make_shared<store::PrefixStore>(fmt::format("braid/{}", incarnation), rdv.store);
    const auto members = iota_ranks(rdv.world_size);
    auto b = backend_options(rdv.rank, members, "world", scope, options.group);
    b.global_ranks.clear();  // the whole world
    GroupPtr group = make_group(backend, b);
    store_barrier(*scope, "world", members, rdv.rank, timeout);

    std::lock_guard<std::mutex> lock(w.mu);
    w.rank = rdv.rank;
    w.size = rdv.world_size;
    w.backend = backend;
    w.options = options.group;
    w.store = rdv.store;
    w.scope = std::move(scope);
    w.incarnation = incarnation;
    w.entries.push_back({std::move(group), backend, members, true});
    w.state = World::State::kReady;
  } catch (...) {
    std::lock_guard<std::mutex> lock(w.mu);
    w.state = World::State::kEmpty;
    throw;
  }
  logging::get("braid.coll")->debug("initialized the default group: rank {}/{}, backend {}", get_rank(),
                                    get_world_size(), backend);
}

bool is_initialized() {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  return w.state == World::State::kReady;
}

GroupPtr default_group() {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  require_ready_locked(w, "default_group");
  return w.entries.front().group;
}

std::shared_ptr<store::Store> default_store() {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  require_ready_locked(w, "default_store");
  return w.store;
}

std::string default_backend() {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  require_ready_locked(w, "default_backend");
  return w.backend;
}

GroupPtr new_group(std::vector<int> ranks, const NewGroupOptions& options) {
  const Snapshot s = snapshot("new_group");
  for (int r : ranks) {
    BRAID_CHECK_ARG(r >= 0 && r < s.size,
                    "new_group: rank {} is out of range: the new group's ranks must be within the world size {}", r,
                    s.size);
  }
  std::sort(ranks.begin(), ranks.end());
  BRAID_CHECK_ARG(std::adjacent_find(ranks.begin(), ranks.end()) == ranks.end(),
                  "new_group: ranks [{}] contain a duplicate", fmt::join(ranks, ", "));
  if (ranks.empty()) ranks = iota_ranks(s.size);
  const auto it = std::lower_bound(ranks.begin(), ranks.end(), s.rank);
  const bool member = it != ranks.end() && *it == s.rank;
  if (options.use_local_synchronization && !member) return kNonGroupMember;

  const std::string backend = options.backend.empty() ? s.backend : options.backend;
  const GroupOptions go = options.pg_options.value_or(s.options);
  // Who has to meet before the group is usable: nobody for a one-rank group, the members for a local
  // group, everyone otherwise.
  enum class Sync { kNone, kMembers, kAll } sync = Sync::kAll;
  std::string name;
  {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    require_ready_locked(w, "new_group");
    if (ranks.size() == 1 && s.size > 1) {  // a one-rank world's groups are ordinary all-rank groups
      name = fmt::format("solo-{}-{}", ranks[0], w.local_counts[ranks]++);
      sync = Sync::kNone;
    } else if (options.use_local_synchronization) {
      name = fmt::format("local-{}-{}", list_tag(ranks), w.local_counts[ranks]++);
      sync = Sync::kMembers;
    } else {
      name = fmt::format("group-{}", ++w.group_count);
    }
  }

  const int group_rank = member ? static_cast<int>(it - ranks.begin()) : -1;
  GroupPtr group = member ? make_group(backend, backend_options(group_rank, ranks, name, s.scope, go))
                          : std::make_shared<NonMemberProcessGroup>(name, backend, s.rank, ranks);
  if (sync == Sync::kAll) store_barrier(*s.scope, name, iota_ranks(s.size), s.rank, go.timeout);
  if (sync == Sync::kMembers) store_barrier(*s.scope, name, ranks, group_rank, go.timeout);

  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  BRAID_CHECK_ARG(w.state == World::State::kReady && w.incarnation == s.incarnation,
                  "new_group: the default group was destroyed while group '{}' was being created", name);
  w.entries.push_back({group, backend, ranks, member});
  return group;
}

std::pair<GroupPtr, std::vector<GroupPtr>> new_subgroups(int group_size, const NewGroupOptions& options) {
  const int world_size = get_world_size();
  BRAID_CHECK_ARG(group_size > 0, "new_subgroups: The arg 'group_size' ({}) must be positive", group_size);
  BRAID_CHECK_ARG(group_size <= world_size, "new_subgroups: The arg 'group_size' ({}) must not exceed the world size ({})",
                  group_size, world_size);
  BRAID_CHECK_ARG(world_size % group_size == 0,
                  "new_subgroups: The world size ({}) must be divisible by 'group_size' ({})", world_size, group_size);
  const int rank = get_rank();
  GroupPtr mine;
  std::vector<GroupPtr> all;
  for (int first = 0; first < world_size; first += group_size) {
    std::vector<int> ranks(static_cast<size_t>(group_size));
    for (int i = 0; i < group_size; ++i) ranks[static_cast<size_t>(i)] = first + i;
    GroupPtr g = new_group(ranks, options);
    if (rank >= first && rank < first + group_size) mine = g;
    all.push_back(std::move(g));
  }
  return {mine, all};
}

void destroy_process_group(const GroupArg& group) {
  if (group && *group == nullptr) return;  // kNonGroupMember
  World& w = world();
  std::vector<Entry> doomed;  // released outside the lock: engines join their threads on destruction
  std::shared_ptr<store::Store> store, scope;
  int left_rank = -1, left_size = 0;
  Millis left_timeout{0};
  {
    std::lock_guard<std::mutex> lock(w.mu);
    require_ready_locked(w, "destroy_process_group");
    if (!group || *group == w.entries.front().group) {
      left_rank = w.rank;
      left_size = w.size;
      left_timeout = std::min(w.options.timeout, kMaxLeaveWait);
      doomed.swap(w.entries);
      store = std::move(w.store);
      scope = std::move(w.scope);
      w.state = World::State::kEmpty;
      w.rank = -1;
      w.size = 0;
      w.group_count = 0;
      w.local_counts.clear();
      w.warned_ops.clear();
    } else {
      auto it = std::find_if(w.entries.begin(), w.entries.end(), [&](const Entry& e) { return e.group == *group; });
      if (it == w.entries.end()) throw_not_registered("destroy_process_group", *group);
      doomed.push_back(std::move(*it));
      w.entries.erase(it);
    }
  }
  // Newest first: a group made later may use one made earlier (a round-robin over subgroups, say).
  while (!doomed.empty()) {
    Entry& e = doomed.back();
    const long held_by_caller = (group && *group == e.group) ? 1 : 0;
    if (e.group.use_count() > 1 + held_by_caller) {
      logging::get("braid.coll")
          ->debug("destroy_process_group: group '{}' is still referenced; it shuts down when the last reference "
                  "goes",
                  e.group->name());
    }
    doomed.pop_back();
  }
  if (scope) leave_store(*store, *scope, left_rank, left_size, left_timeout);
}

int get_rank(const GroupArg& group) {
  if (group && *group == nullptr) return -1;
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  require_ready_locked(w, "get_rank");
  if (!group) return w.rank;
  if (const Entry* e = find_locked(w, group->get())) return e->member ? e->group->rank() : -1;
  if (dynamic_cast<const NonMemberProcessGroup*>(group->get()) != nullptr) return -1;
  return (*group)->rank();
}

int get_world_size(const GroupArg& group) {
  if (group && *group == nullptr) return -1;
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  require_ready_locked(w, "get_world_size");
  if (!group) return w.size;
  if (dynamic_cast<const NonMemberProcessGroup*>(group->get()) != nullptr) return -1;
  return (*group)->size();
}

int get_group_rank(const GroupPtr& group, int global_rank) {
  const Entry e = registered("get_group_rank", group);
  const auto it = std::find(e.ranks.begin(), e.ranks.end(), global_rank);
  BRAID_CHECK_ARG(it != e.ranks.end(), "get_group_rank: Global rank {} is not part of group '{}' (members [{}])",
                  global_rank, group->name(), fmt::join(e.ranks, ", "));
  return static_cast<int>(it - e.ranks.begin());
}

int get_global_rank(const GroupPtr& group, int group_rank) {
  const Entry e = registered("get_global_rank", group);
  BRAID_CHECK_ARG(group_rank >= 0 && group_rank < static_cast<int>(e.ranks.size()),
                  "get_global_rank: Group rank {} is not part of group '{}' (size {})", group_rank, group->name(),
                  e.ranks.size());
  return e.ranks[static_cast<size_t>(group_rank)];
}

std::vector<int> get_process_group_ranks(const GroupPtr& group) {
  return registered("get_process_group_ranks", group).ranks;
}

std::string get_backend(const GroupArg& group) {
  if (!group) return default_backend();
  if (*group == nullptr) BRAID_THROW(InvalidArgument, "get_backend: Invalid process group specified (NON_GROUP_MEMBER)");
  return registered("get_backend", *group).backend;
}

uint64_t get_sequence_number_for_group(const GroupArg& group) {
  if (!group) return default_group()->sequence_number();
  BRAID_CHECK_ARG(*group != nullptr, "get_sequence_number_for_group: rank is not a member of the group "
                  "(NON_GROUP_MEMBER)");
  return (*group)->sequence_number();
}

GroupPtr group_for_op(const GroupArg& group, const char* op) {
  if (!group) return default_group();
  const auto* non_member = dynamic_cast<const NonMemberProcessGroup*>(group->get());
  if (*group != nullptr && non_member == nullptr) return *group;
  World& w = world();
  bool first = false;
  int rank = -1;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    first = w.warned_ops.insert(op).second;
    if (w.state == World::State::kReady) rank = w.rank;
  }
  if (first) {
    logging::get("braid.coll")
        ->warn("Running {} on global rank {} which does not belong to the given group{}; skipped", op, rank,
               non_member != nullptr ? fmt::format(" '{}'", non_member->name()) : std::string(" (NON_GROUP_MEMBER)"));
  }
  return nullptr;
}

void register_backend(const std::string& name, BackendFactory factory) {
  BRAID_CHECK_ARG(!name.empty() && factory != nullptr, "register_backend: needs a name and a factory");
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  w.factories[name] = std::move(factory);
}

}  // namespace braid::collectives
