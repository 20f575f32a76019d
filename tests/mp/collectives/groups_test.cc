// The group registry across ranks (collectives/registry/group_registry.h): sequence numbers (torch's
// _get_sequence_number_for_group tests), new_group membership, non-member warnings and local synchronization
// (torch's _test_rank_membership, _test_warn_not_in_group and LargeCommTest), one-rank groups on every rank,
// new_subgroups, round-robin groups (torch's _round_robin_process_groups), broadcast_coalesced, the store
// barrier's timeout, and destroy + init again on the same store. Each case initializes the registry on the
// fixture's private store and destroys it at the end.
#include <filesystem>
#include <dirent.h>
#include <spdlog/sinks/ostream_sink.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "base/logging.h"
#include "collectives/registry/coalesced.h"
#include "collectives/registry/non_member.h"
#include "collectives/registry/round_robin.h"
#include "collectives/registry/group_registry.h"
#include "tests/mp/support/mp_test.h"
#include "tests/mp/support/registry_scope.h"

using namespace braid;
using namespace braid::mp;
using namespace braid::collectives;
using Catch::Contains;

namespace {

// Every rank's value of `v`, gathered over `pg` (a group whose own counters the test does not watch).
std::vector<int64_t> gather_values(MpFixture& f, ProcessGroup& pg, int64_t v) {
  std::vector<TensorList> out(1);
  for (int i = 0; i < f.size(); ++i) out[0].push_back(f.dev(zeros({1}, DType::Int64)));
  TensorList in{f.dev(ints({v}))};
  pg.allgather(out, in)->wait();
  std::vector<int64_t> values;
  for (const auto& t : out[0]) values.push_back(t.cpu().item<int64_t>());
  return values;
}

struct CapturedLog {
  std::ostringstream text;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text);
  CapturedLog() { logging::get("braid.coll")->sinks().push_back(sink); }
  ~CapturedLog() {
    auto& sinks = logging::get("braid.coll")->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  }
  std::string str() {
    logging::get("braid.coll")->flush();
    return text.str();
  }
};

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (auto at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

int thread_count() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(d);
  }
  return n;
}

std::vector<int> even_ranks(int size) {
  std::vector<int> r;
  for (int i = 0; i < size; i += 2) r.push_back(i);
  return r;
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "groups: sequence numbers agree across ranks and rise by one per op",
                 "[groups]") {
  Registry reg(*this);
  auto check = make_group();  // counts nothing the test watches
  CHECK(gather_values(*this, *check, static_cast<int64_t>(get_sequence_number_for_group())) ==
        std::vector<int64_t>(static_cast<size_t>(size()), 0));
  for (int k = 1; k <= 10; ++k) {
    all_reduce(dev(ones({2})));
    const auto seqs = gather_values(*this, *check, static_cast<int64_t>(get_sequence_number_for_group()));
    CHECK(seqs == std::vector<int64_t>(static_cast<size_t>(size()), k));
  }
  if (size() >= 2) {
    auto g = new_group({0, 1});
    const int64_t mine = get_rank(g) >= 0 ? static_cast<int64_t>(get_sequence_number_for_group(g)) : -1;
    auto before = gather_values(*this, *check, mine);
    CHECK(before[0] == before[1]);
    if (get_rank(g) >= 0) {
      for (int k = 0; k < 3; ++k) all_reduce(dev(ones({1})), ReduceOp::SUM, g);
    }
    auto after = gather_values(*this, *check, get_rank(g) >= 0 ? static_cast<int64_t>(get_sequence_number_for_group(g)) : -1);
    CHECK(after[0] == before[0] + 3);
    CHECK(after[1] == before[1] + 3);
  }
  CHECK(get_sequence_number_for_group() == 10);  // the subgroup's ops do not count on the default group
}

TEST_CASE_METHOD(MpFixture, "groups: membership of new_group({1}) and the errors (_test_rank_membership)", "[groups]") {
  if (size() < 2) return;
  Registry reg(*this);
  auto g = new_group({1});
  CHECK(get_group_rank(g, 1) == 0);
  CHECK_THROWS_WITH(get_group_rank(g, 0), Contains("not part of group"));
  CHECK(get_global_rank(g, 0) == 1);
  CHECK_THROWS_WITH(get_global_rank(g, 1), Contains("not part of group"));
  CHECK(get_process_group_ranks(g) == std::vector<int>{1});
  CHECK(get_rank(g) == (rank() == 1 ? 0 : -1));
  CHECK(get_world_size(g) == (rank() == 1 ? 1 : -1));
  auto unregistered = make_group();
  CHECK_THROWS_WITH(get_group_rank(unregistered, 0), Contains("not registered"));
  CHECK_THROWS_WITH(get_global_rank(unregistered, 0), Contains("not registered"));
  if (rank() == 1) {
    Tensor t = dev(ints({5}));
    all_reduce(t, ReduceOp::SUM, g);
    CHECK_THAT(t, Equals(ints({5})));
  } else {
    TensorList t{dev(ints({5}))};
    CHECK_THROWS_WITH(g->allreduce(t), Contains("does not belong to group"));
  }
  // Every rank's group made after it still agrees on the name (the one-rank group took no number).
  auto all = new_group();
  CHECK(all->name() == "group-1");
  Tensor one = dev(ones({1}));
  all_reduce(one, ReduceOp::SUM, all);
  CHECK_THAT(one, Equals(floats({static_cast<double>(size())})));
}

TEST_CASE_METHOD(MpFixture, "groups: non-members warn once per op and skip, members run (_test_warn_not_in_group)",
                 "[groups]") {
  if (size() < 2) return;
  Registry reg(*this);
  const auto evens = even_ranks(size());
  auto g = new_group(evens);
  const bool member = rank() % 2 == 0;
  const auto n = static_cast<double>(evens.size());
  CapturedLog log;
  for (int round = 0; round < 2; ++round) {
    Tensor t = dev(ones({3}));
    auto w = all_reduce(t, ReduceOp::SUM, g);
    std::vector<Tensor> out;
    for (size_t i = 0; i < evens.size(); ++i) out.push_back(dev(zeros({1})));
    auto w2 = all_gather(out, dev(floats({static_cast<double>(rank())})), g);
    Tensor b = dev(floats({static_cast<double>(rank())}));
    auto w3 = broadcast(b, evens.back(), g);  // src is a global rank
    auto w4 = barrier(g);
    if (member) {
      CHECK((w && w2 && w3 && w4));
      CHECK_THAT(t, Equals(floats({n, n, n})));
      for (size_t i = 0; i < evens.size(); ++i) CHECK_THAT(out[i], Equals(floats({static_cast<double>(evens[i])})));
      CHECK_THAT(b, Equals(floats({static_cast<double>(evens.back())})));
    } else {
      CHECK((!w && !w2 && !w3 && !w4));
      CHECK_THAT(t, Equals(floats({1, 1, 1})));  // nothing communicated
    }
  }
  const std::string text = log.str();
  for (const char* op : {"all_reduce", "all_gather", "broadcast", "barrier"}) {
    INFO(op << " in: " << text);
    CHECK(count(text, std::string("Running ") + op + " on global rank") == (member ? 0u : 1u));
  }
  CHECK(get_sequence_number_for_group(g) == (member ? 8u : 0u));
}

TEST_CASE_METHOD(MpFixture, "groups: local synchronization, sorted ranks, identical groups (LargeCommTest)", "[groups]") {
  if (size() < 2) return;
  Registry reg(*this);
  NewGroupOptions local;
  local.use_local_synchronization = true;
  // A group this rank is not in: only its members would call, so this returns at once.
  CHECK(new_group({(rank() + 1) % size()}, local) == kNonGroupMember);

  // Pairs {0,1}, {2,3}, ... (a last odd rank is alone), given unsorted.
  const int lo = rank() - rank() % 2;
  const int hi = std::min(lo + 1, size() - 1);
  std::vector<int> pair = lo == hi ? std::vector<int>{lo} : std::vector<int>{hi, lo};
  auto a = new_group(pair, local);
  auto b = new_group(pair, local);  // the same members again: its own group
  REQUIRE(a != nullptr);
  CHECK(a->name() != b->name());
  CHECK(get_process_group_ranks(a) == (lo == hi ? std::vector<int>{lo} : std::vector<int>{lo, hi}));
  CHECK(get_rank(a) == rank() - lo);
  const double idx = lo / 2;
  for (const auto& g : {a, b, a}) {
    std::vector<Tensor> out;
    for (int i = lo; i <= hi; ++i) out.push_back(dev(zeros({2})));
    all_gather(out, dev(floats({idx, static_cast<double>(rank())})), g);
    for (int i = lo; i <= hi; ++i) CHECK_THAT(out[static_cast<size_t>(i - lo)], Equals(floats({idx, static_cast<double>(i)})));
  }
  // The registry is still in step for all-rank groups afterwards.
  sync("after-local");
  Tensor one = dev(ones({1}));
  all_reduce(one, ReduceOp::SUM, new_group());
  CHECK_THAT(one, Equals(floats({static_cast<double>(size())})));
}

TEST_CASE_METHOD(MpFixture, "groups: every rank creates its own one-rank group (MixtureOfExperts)", "[groups]") {
  Registry reg(*this);
  auto mine = new_group({rank()});
  CHECK(get_world_size(mine) == 1);
  CHECK(get_rank(mine) == 0);
  Tensor t = dev(floats({static_cast<double>(rank())}));
  all_reduce(t, ReduceOp::SUM, mine);
  CHECK_THAT(t, Equals(floats({static_cast<double>(rank())})));
  // Groups over all ranks made afterwards still match up across ranks.
  auto g1 = new_group();
  auto g2 = new_group();  // identical members, a different group
  // In a one-rank world the one-rank group above is an all-rank group too, and took "group-1".
  const int first = size() == 1 ? 2 : 1;
  CHECK(g1->name() == fmt::format("group-{}", first));
  CHECK(g2->name() == fmt::format("group-{}", first + 1));
  for (const auto& g : {g1, g2, g1}) {
    Tensor x = dev(ones({4}));
    all_reduce(x, ReduceOp::SUM, g);
    CHECK_THAT(x, Equals(floats({1.0 * size(), 1.0 * size(), 1.0 * size(), 1.0 * size()})));
  }
}

TEST_CASE_METHOD(MpFixture, "groups: new_subgroups splits the world into consecutive groups", "[groups]") {
  Registry reg(*this);
  const int group_size = size() % 2 == 0 ? 2 : 1;
  auto [mine, all] = new_subgroups(group_size);
  CHECK(all.size() == static_cast<size_t>(size() / group_size));
  REQUIRE(mine != nullptr);
  CHECK(get_process_group_ranks(mine).front() == rank() - rank() % group_size);
  Tensor t = dev(floats({static_cast<double>(rank())}));
  all_reduce(t, ReduceOp::SUM, mine);
  const int first = rank() - rank() % group_size;
  double want = 0;
  for (int i = first; i < first + group_size; ++i) want += i;
  CHECK_THAT(t, Equals(floats({want})));
}

TEST_CASE_METHOD(MpFixture,
                 "groups: round robin broadcasts, and create/destroy leaks nothing (test_round_robin_create_destroy)",
                 "[groups][round_robin]") {
  Registry reg(*this);
  {
    RoundRobinProcessGroup rr({new_group(), new_group()});
    for (int i = 0; i < 3; ++i) {
      TensorList t{dev(full({100, 100}, static_cast<double>(rank())))};
      rr.broadcast(t)->wait();
      CHECK_THAT(t[0], Equals(zeros({100, 100})));
    }
    rr.barrier()->wait();
  }
  int after_first = 0;
  for (int round = 0; round < 2; ++round) {
    auto g1 = new_group();
    auto g2 = new_group();
    {
      auto rr = std::make_shared<RoundRobinProcessGroup>(std::vector<GroupPtr>{g1, g2});
      for (int i = 0; i < 3; ++i) {
        TensorList t{dev(ones({10, 10}))};
        rr->allreduce(t)->wait();
        CHECK_THAT(t[0], Equals(full({10, 10}, static_cast<double>(size()))));
      }
    }
    destroy_process_group(g1);
    destroy_process_group(g2);
    g1.reset();
    g2.reset();
    // Engines may keep per-process threads (an MPI progress thread, a transport loop) that start with
    // their first group; what must not grow is the count from one round to the next.
    if (round == 0) after_first = thread_count();
    if (round == 1) CHECK(thread_count() == after_first);
  }
}

TEST_CASE_METHOD(MpFixture, "groups: broadcast_coalesced from every root, every bucket size", "[groups][coalesced]") {
  Registry reg(*this);
  auto pg = default_group();
  for (size_t buffer : {size_t{1}, size_t{64}, size_t{1} << 20}) {
    for (int root = 0; root < size(); ++root) {
      INFO("buffer " << buffer << " root " << root);
      const double base = 100.0 * root;
      TensorList want{floats({base, base + 1, base + 2}), ints({root, -root}, DType::Int32),
                      floats({base + 3, base + 4}, DType::Float64), floats({base + 5, base + 6, base + 7, base + 8}),
                      ints({}, DType::Int64)};
      TensorList t;
      for (const auto& w : want) t.push_back(dev(rank() == root ? w.clone() : zeros_like(w)));
      broadcast_coalesced(*pg, t, buffer, root);
      for (size_t i = 0; i < t.size(); ++i) CHECK_THAT(t[i], Equals(want[i]));
    }
  }
  // Non-contiguous tensors are packed and unpacked through their strides.
  Tensor col = dev(column_view(rank() == 0 ? floats({1, 2, 3}) : zeros({3})));
  TensorList cols{col};
  broadcast_coalesced(*pg, cols, 1 << 20, 0);
  CHECK_THAT(col, Equals(floats({1, 2, 3})));
}

TEST_CASE_METHOD(MpFixture, "groups: the store barrier of new_group names the ranks that never came", "[groups]") {
  // Rank 0 alone asks for a group of the others (it is no member, so it only waits in the barrier). A
  // one-rank group has no barrier, so this needs three ranks.
  if (size() < 3) return;
  Registry reg(*this);
  if (rank() == 0) {
    NewGroupOptions o;
    o.pg_options = collectives::GroupOptions{};
    o.pg_options->timeout = Millis(1500);
    std::vector<int> others;
    for (int r = 1; r < size(); ++r) others.push_back(r);
    CHECK_THROWS_WITH(new_group(others, o), Contains("Timed out initializing process group in store based barrier") &&
                                                 Contains("missing ranks: [1"));
  }
  sync("after-timeout");
}

TEST_CASE_METHOD(MpFixture, "groups: destroy, then init again on the same store", "[groups]") {
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    Registry reg(*this);
    auto g = new_group();
    CHECK(g->name() == "group-1");  // the same name in both rounds, kept apart by the incarnation
    Tensor t = dev(ones({2}));
    all_reduce(t, ReduceOp::SUM, g);
    CHECK_THAT(t, Equals(floats({1.0 * size(), 1.0 * size()})));
    barrier();
  }
  CHECK_FALSE(is_initialized());
}

TEST_CASE_METHOD(MpFixture, "groups: init_process_group through an init method (file://, mpirun)", "[groups]") {
  // file://: rank 0 names a fresh file; every rank opens the same one. In TMPDIR: across hosts that is a
  // folder they share (tests/multihost/run_multihost.sh), as file:// needs a shared file system.
  if (rank() == 0) {
    store()->set("path", (std::filesystem::temp_directory_path() /
                          fmt::format("braid-groups-{}-{}", ::getpid(), std::rand())).string());
  }
  const std::string path = store()->get_string("path");
  for (const std::string& method : {std::string("file://") + path, std::string("mpirun")}) {
    INFO(method);
    if (method == "mpirun" && world().launcher != "mpi") continue;
    InitOptions o;
    if (method != "mpirun") {
      o.init_method = method;
      o.rank = rank();
      o.world_size = size();
    }
    o.group.timeout = kTestGroupTimeout;
    init_process_group(backend(), o);
    struct DestroyAtEnd {
      ~DestroyAtEnd() {
        if (is_initialized()) destroy_process_group();
      }
    } destroy_at_end;
    CHECK(get_rank() == rank());
    CHECK(get_world_size() == size());
    Tensor t = dev(ones({3}));
    all_reduce(t);
    CHECK_THAT(t, Equals(floats({1.0 * size(), 1.0 * size(), 1.0 * size()})));
    auto g = new_group();
    all_reduce(t, ReduceOp::SUM, g);
    CHECK_THAT(t, Equals(floats({1.0 * size() * size(), 1.0 * size() * size(), 1.0 * size() * size()})));
    barrier();
  }
  sync("before-unlink");
  if (rank() == 0) std::remove(path.c_str());
}
