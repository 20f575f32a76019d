// RoundRobinProcessGroup on one process: rotation, barrier over every group, checks, no leaked threads.
#include <catch2/catch.hpp>

#include "collectives/registry/round_robin.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/unit/collectives_registry/fake_engine.h"

using namespace braid;
using namespace braid::collectives;
using Catch::Contains;

namespace {
std::shared_ptr<ProcessGroup> fake(const std::string& name, int rank = 0, int size = 1) {
  return testing::fake_group(rank, size, name, nullptr);
}
}  // namespace

TEST_CASE("round robin: successive calls rotate over the groups", "[collectives][round_robin]") {
  auto a = fake("a");
  auto b = fake("b");
  RoundRobinProcessGroup rr({a, b});
  REQUIRE(rr.name() == "round_robin(a,b)");
  REQUIRE(rr.backend_name() == "round_robin");
  REQUIRE(rr.rank() == 0);
  REQUIRE(rr.size() == 1);
  TensorList t{ones({10, 10})};
  for (int i = 0; i < 3; ++i) rr.allreduce(t)->wait();
  REQUIRE(a->sequence_number() == 2);
  REQUIRE(b->sequence_number() == 1);
  REQUIRE(rr.sequence_number() == 3);
  // A call refused by the checks does not move the rotation.
  TensorList empty;
  REQUIRE_THROWS_WITH(rr.allreduce(empty), Contains("requires non-empty tensor list"));
  rr.broadcast(t)->wait();
  REQUIRE(b->sequence_number() == 2);
  REQUIRE(equal(t[0], ones({10, 10})));
}

TEST_CASE("round robin: barrier runs on every group", "[collectives][round_robin]") {
  auto a = fake("a");
  auto b = fake("b");
  RoundRobinProcessGroup rr({a, b}, "rr");
  REQUIRE(rr.name() == "rr");
  auto w = rr.barrier();
  w->wait();
  REQUIRE(w->is_completed());
  REQUIRE(a->sequence_number() == 1);
  REQUIRE(b->sequence_number() == 1);
  REQUIRE(rr.sequence_number() == 1);
}

TEST_CASE("round robin: groups must agree on rank and size", "[collectives][round_robin]") {
  REQUIRE_THROWS_WITH(RoundRobinProcessGroup({}), Contains("at least one"));
  REQUIRE_THROWS_WITH(RoundRobinProcessGroup({fake("a"), nullptr}), Contains("null"));
  REQUIRE_THROWS_WITH(RoundRobinProcessGroup({fake("a"), fake("b", 1, 2)}), Contains("same rank and size"));
}

TEST_CASE("round robin: create and destroy twice leaves no thread behind (test_round_robin_create_destroy)",
          "[collectives][round_robin]") {
  const int before = testing::thread_count();
  for (int round = 0; round < 2; ++round) {
    auto rr = std::make_shared<RoundRobinProcessGroup>(std::vector<std::shared_ptr<ProcessGroup>>{fake("a"), fake("b")});
    for (int i = 0; i < 3; ++i) {
      TensorList t{ones({10, 10})};
      rr->allreduce(t)->wait();
      REQUIRE(equal(t[0], full({10, 10}, 1.0)));
    }
  }
  REQUIRE(testing::thread_count() == before);
}
