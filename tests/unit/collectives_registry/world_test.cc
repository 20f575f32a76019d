// The group registry on one process (world size 1), over the in-process "fake" engine: the default
// group, new_group naming and membership, non-member handles and their warnings, destroy and re-init.
// Several ranks are covered by tests/mp/collectives/groups_test.cc.
#include <catch2/catch.hpp>
#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <sstream>

#include "base/logging.h"
#include "collectives/registry/non_member.h"
#include "collectives/registry/group_registry.h"
#include "store/hash_store.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/unit/collectives_registry/fake_engine.h"

using namespace braid;
using namespace braid::collectives;
using Catch::Contains;

namespace {

// Initializes a one-rank world on the fake engine and destroys it at the end of the test.
struct OneRankWorld {
  std::shared_ptr<store::HashStore> store = std::make_shared<store::HashStore>();
  explicit OneRankWorld(std::shared_ptr<store::HashStore> s = nullptr) {
    if (s) store = std::move(s);
    register_backend("fake", testing::make_fake);
    InitOptions o;
    o.store = store;
    o.rank = 0;
    o.world_size = 1;
    o.group.timeout = Millis(5000);
    init_process_group("fake", o);
  }
  ~OneRankWorld() {
    if (is_initialized()) destroy_process_group();
  }
};

// Collects what the "braid.coll" logger writes while it lives.
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

}  // namespace

TEST_CASE("world: init, the default group and the errors before and after", "[collectives][world]") {
  register_backend("fake", testing::make_fake);
  REQUIRE_FALSE(is_initialized());
  REQUIRE_THROWS_WITH(get_rank(), Contains("has not been initialized"));
  REQUIRE_THROWS_WITH(new_group({0}), Contains("has not been initialized"));
  {
    InitOptions bad;
    bad.store = std::make_shared<store::HashStore>();
    bad.init_method = "file:///tmp/x";
    bad.rank = 0;
    bad.world_size = 1;
    REQUIRE_THROWS_WITH(init_process_group("fake", bad), Contains("Cannot specify both init_method and store"));
    bad.init_method.clear();
    bad.world_size = -1;
    REQUIRE_THROWS_WITH(init_process_group("fake", bad), Contains("world_size must be positive"));
    REQUIRE_FALSE(is_initialized());  // a failed init leaves nothing behind
  }
  OneRankWorld w;
  REQUIRE(is_initialized());
  REQUIRE(get_rank() == 0);
  REQUIRE(get_world_size() == 1);
  REQUIRE(default_group()->name() == "world");
  REQUIRE(get_backend() == "fake");
  REQUIRE(default_store() == w.store);
  REQUIRE(get_process_group_ranks(default_group()) == std::vector<int>{0});
  REQUIRE(get_group_rank(default_group(), 0) == 0);
  InitOptions again;
  again.store = w.store;
  again.rank = 0;
  again.world_size = 1;
  REQUIRE_THROWS_WITH(init_process_group("fake", again), Contains("twice"));
  // The default group got a store of its own, named after it, and the whole world.
  const auto& made = testing::created().back();
  REQUIRE(made.group_name == "world");
  REQUIRE(made.global_ranks.empty());
  made.store->set("k", std::string_view("v"));
  REQUIRE(w.store->check({"braid/0/world/k"}));
}

TEST_CASE("world: new_group names, ranks and the membership errors (as torch's _test_rank_membership)",
          "[collectives][world]") {
  OneRankWorld w;
  // In a one-rank world every group spans the whole world, so each is an ordinary all-rank group
  // "group-N" (as on every rank of a larger world); identical member lists still get distinct names.
  // Local synchronization names the group after its members.
  auto all = new_group();
  auto all_again = new_group({0});
  auto solo = new_group({0});
  REQUIRE(all->name() == "group-1");
  REQUIRE(all_again->name() == "group-2");
  REQUIRE(solo->name() == "group-3");
  NewGroupOptions local;
  local.use_local_synchronization = true;
  REQUIRE(new_group({0}, local)->name() == "local-0-0");
  NewGroupOptions gloo_like;
  gloo_like.pg_options = GroupOptions{Millis(1234), 8, {"lo", "lo"}, -1, std::nullopt};
  REQUIRE(new_group({}, gloo_like)->name() == "group-4");

  const auto& made = testing::created().back();
  REQUIRE(made.group_name == "group-4");
  REQUIRE(made.global_ranks == std::vector<int>{0});
  REQUIRE(made.rank == 0);
  REQUIRE(made.size == 1);
  REQUIRE(made.threads == 8);
  REQUIRE(made.timeout == Millis(1234));
  REQUIRE(made.devices.size() == 2);

  REQUIRE(get_rank(solo) == 0);
  REQUIRE(get_world_size(solo) == 1);
  REQUIRE(get_group_rank(solo, 0) == 0);
  REQUIRE(get_global_rank(solo, 0) == 0);
  REQUIRE(get_process_group_ranks(solo) == std::vector<int>{0});
  REQUIRE_THROWS_WITH(get_group_rank(solo, 1), Contains("not part of group"));
  REQUIRE_THROWS_WITH(get_global_rank(solo, 1), Contains("not part of group"));
  REQUIRE_THROWS_AS(get_global_rank(solo, -1), InvalidArgument);

  auto stranger = testing::make_fake(BackendOptions{});
  REQUIRE_THROWS_WITH(get_group_rank(stranger, 0), Contains("not registered"));
  REQUIRE_THROWS_WITH(get_global_rank(stranger, 0), Contains("not registered"));
  REQUIRE_THROWS_WITH(get_process_group_ranks(stranger), Contains("not registered"));
  REQUIRE(get_rank(stranger) == 0);  // an unregistered group answers for itself
  REQUIRE_THROWS_WITH(get_group_rank(kNonGroupMember, 0), Contains("not registered"));
  REQUIRE(get_rank(kNonGroupMember) == -1);
  REQUIRE(get_world_size(kNonGroupMember) == -1);

  REQUIRE_THROWS_WITH(new_group({1}), Contains("out of range"));
  REQUIRE_THROWS_WITH(new_group({0, 0}), Contains("duplicate"));
}

TEST_CASE("world: module-level collectives and sequence numbers", "[collectives][world]") {
  OneRankWorld w;
  REQUIRE(get_sequence_number_for_group() == 0);
  auto g = new_group();
  REQUIRE(get_sequence_number_for_group(g) == 0);
  Tensor t = from_vector<float>({1, 2, 3});
  REQUIRE(all_reduce(t) != nullptr);
  REQUIRE(equal(t, from_vector<float>({1, 2, 3})));
  REQUIRE(get_sequence_number_for_group() == 1);
  auto work = all_reduce(t, ReduceOp::MAX, g, /*async_op=*/true);
  work->wait();
  std::vector<Tensor> out{zeros({3})};
  all_gather(out, t, g);
  REQUIRE(equal(out[0], t));
  std::vector<Tensor> wrong{zeros({3}, DType::Float64)};
  REQUIRE_THROWS_WITH(all_gather(wrong, t, g), Contains("tensors with different dtypes"));
  broadcast(t, 0, g);
  barrier(g);
  REQUIRE(get_sequence_number_for_group(g) == 4);  // +1 per op, on the group it ran on
  REQUIRE(get_sequence_number_for_group() == 1);
  REQUIRE_THROWS_WITH(broadcast(t, 1, g), Contains("not part of group"));  // src is a global rank
}

TEST_CASE("world: a non-member handle refuses collectives, the module functions warn once per op",
          "[collectives][world]") {
  OneRankWorld w;
  NonMemberProcessGroup nm("group-7", "fake", 3, {0, 2});
  TensorList t{zeros({2})};
  REQUIRE_THROWS_WITH(nm.allreduce(t), Contains("allreduce: rank 3 does not belong to group 'group-7'"));
  REQUIRE_THROWS_WITH(nm.barrier(), Contains("does not belong to group"));
  REQUIRE_THROWS_AS(nm.broadcast(t), InvalidArgument);

  auto handle = std::make_shared<NonMemberProcessGroup>("group-7", "fake", 3, std::vector<int>{0, 2});
  CapturedLog log;
  for (int i = 0; i < 2; ++i) {
    REQUIRE(all_reduce(t[0], ReduceOp::SUM, handle) == nullptr);
    std::vector<Tensor> out{zeros({2}), zeros({2})};
    REQUIRE(all_gather(out, t[0], handle) == nullptr);
    REQUIRE(broadcast(t[0], 0, handle) == nullptr);
    REQUIRE(barrier(kNonGroupMember) == nullptr);
  }
  const std::string text = log.str();
  for (const char* op : {"all_reduce", "all_gather", "broadcast", "barrier"}) {
    INFO(op << " in: " << text);
    REQUIRE(count(text, std::string("Running ") + op + " on global rank") == 1);
  }
  REQUIRE(count(text, "does not belong to") == 4);
  REQUIRE(get_sequence_number_for_group() == 0);  // nothing ran
}

TEST_CASE("world: new_subgroups splits the world", "[collectives][world]") {
  OneRankWorld w;
  auto [mine, all] = new_subgroups(1);
  REQUIRE(all.size() == 1);
  REQUIRE(mine == all[0]);
  REQUIRE(get_process_group_ranks(mine) == std::vector<int>{0});
  REQUIRE_THROWS_WITH(new_subgroups(2), Contains("must not exceed the world size"));
  REQUIRE_THROWS_WITH(new_subgroups(0), Contains("must be positive"));
}

TEST_CASE("world: destroy forgets groups, joins their threads, and a store can be reused",
          "[collectives][world]") {
  auto store = std::make_shared<store::HashStore>();
  const int before = testing::thread_count();
  {
    OneRankWorld w(store);
    auto g = new_group();
    REQUIRE(testing::thread_count() > before);
    destroy_process_group(g);
    REQUIRE_THROWS_WITH(get_process_group_ranks(g), Contains("not registered"));
    destroy_process_group(kNonGroupMember);  // ignored
    REQUIRE_THROWS_WITH(destroy_process_group(g), Contains("not registered"));
    g.reset();
    for (int i = 0; i < 3; ++i) new_group();
    destroy_process_group();
    REQUIRE_FALSE(is_initialized());
  }
  REQUIRE(testing::thread_count() == before);

  // A second world on the same store keeps its keys apart from the first one's.
  OneRankWorld again(store);
  REQUIRE(new_group()->name() == "group-1");  // counters start over
  testing::created().back().store->set("k", std::string_view("v"));
  REQUIRE(store->check({"braid/1/group-1/k"}));
}
