// HostLayout (collectives/core/host_layout.h) and the two-level rows of the engine policy
// (collectives/queue/engine_policy.h): which ranks share a host, and which ops go in two levels.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "base/error.h"
#include "collectives/core/host_layout.h"
#include "collectives/queue/engine_policy.h"
#include "tests/unit/collectives_registry/fake_engine.h"

using namespace braid;
using namespace braid::collectives;

TEST_CASE("host layout: hosts in the order of their lowest rank, local ranks in rank order", "[collectives][hier]") {
  const auto l = HostLayout::from_identities({"b", "a", "b", "a", "c"});
  CHECK(l.host_count() == 3);
  CHECK(l.host_of == std::vector<int>{0, 1, 0, 1, 2});
  CHECK(l.local_rank_of == std::vector<int>{0, 0, 1, 1, 0});
  CHECK(l.hosts[1] == std::vector<int>{1, 3});
  CHECK(l.max_local_size() == 2);
  CHECK(l.two_levels());
  CHECK_FALSE(l.uniform());
  CHECK(l.ranks_with_local_rank(0) == std::vector<int>{0, 1, 4});
  CHECK(l.ranks_with_local_rank(1) == std::vector<int>{2, 3});
  CHECK(l.describe() == "3 hosts: 0,2 | 1,3 | 4");
}

TEST_CASE("host layout: one host, or one rank per host, has no second level", "[collectives][hier]") {
  CHECK_FALSE(HostLayout::from_identities({"a", "a", "a"}).two_levels());
  CHECK_FALSE(HostLayout::from_identities({"a", "b", "c"}).two_levels());
  const auto l = HostLayout::from_identities({"a", "a", "b", "b"});
  CHECK(l.two_levels());
  CHECK(l.uniform());
}

TEST_CASE("host layout: BRAID_EMULATED_HOST replaces the host's identity", "[collectives][hier]") {
  const std::string real = host_identity();
  ::setenv("BRAID_EMULATED_HOST", "h1", 1);
  CHECK(host_identity() == "emulated/h1");
  ::setenv("BRAID_EMULATED_HOST", "", 1);
  CHECK(host_identity() == real);
  ::unsetenv("BRAID_EMULATED_HOST");
}

TEST_CASE("engine policy: the two-level engine takes the four ops from hier_min_bytes, on the CPU",
          "[collectives][hier]") {
  BackendOptions o;
  o.hierarchy_min_bytes = 1024;
  const EnginePolicy p = EnginePolicy::resolve("gloo", o);
  // Any engine stands for the two-level one: the policy only asks whether there is one.
  const testing::FakeEngine fake(1, false);
  const Engine* hier = &fake;
  std::string why;
  CHECK(p.hier_first({OpKind::Allreduce, 4096, DType::Int32, EngineOp::MAX}, hier, &why));
  CHECK(why == ">= hier_min_bytes");
  CHECK(p.hier_first({OpKind::ReduceScatter, 1024}, hier));
  CHECK(p.hier_first({OpKind::Allgather, 1024}, hier));
  CHECK(p.hier_first({OpKind::Broadcast, 1024}, hier));
  CHECK_FALSE(p.hier_first({OpKind::Allreduce, 1023}, hier, &why));
  CHECK(why == "below hier_min_bytes");
  CHECK_FALSE(p.hier_first({OpKind::Alltoall, 1 << 20}, hier));
  CHECK_FALSE(p.hier_first({OpKind::Barrier, 0}, hier));
  CHECK_FALSE(p.hier_first({OpKind::Allreduce, 4096}, nullptr, &why));
  CHECK(why == "no two-level engine");
  CHECK_FALSE(p.hier_first({OpKind::Allreduce, 4096, DType::Float32, EngineOp::SUM, Device::cuda(0)}, hier));
  o.hierarchy = false;
  CHECK_FALSE(EnginePolicy::resolve("gloo", o).hier_first({OpKind::Allreduce, 4096}, hier, &why));
  CHECK(why == "two levels are off");
}

TEST_CASE("engine policy: BRAID_HIERARCHY and BRAID_HIERARCHY_MIN_BYTES, and the options over them",
          "[collectives][hier]") {
  ::setenv("BRAID_HIERARCHY", "0", 1);
  ::setenv("BRAID_HIERARCHY_MIN_BYTES", "1M", 1);
  BackendOptions o;
  EnginePolicy p = EnginePolicy::resolve("mpi", o);
  CHECK_FALSE(p.hier_enabled);
  CHECK(p.hier_min_bytes == (1 << 20));
  o.hierarchy = true;
  o.hierarchy_min_bytes = 0;
  p = EnginePolicy::resolve("mpi", o);
  CHECK(p.hier_enabled);
  CHECK(p.hier_min_bytes == 0);
  ::setenv("BRAID_HIERARCHY", "yes", 1);
  CHECK_THROWS_WITH(EnginePolicy::resolve("mpi", BackendOptions{}), Catch::Contains("BRAID_HIERARCHY must be 0 or 1"));
  ::unsetenv("BRAID_HIERARCHY");
  ::unsetenv("BRAID_HIERARCHY_MIN_BYTES");
  CHECK(EnginePolicy::resolve("mpi", BackendOptions{}).hier_enabled);
}
