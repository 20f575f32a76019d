// What the mpi engine learns from Open MPI itself, and the rules its own direct exchanges enforce. Other
// engines have nothing to check here.
#include <cstdlib>
#include <string>
#include <vector>

#include "collectives/mpi/mpi_runtime.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using Catch::Contains;

TEST_CASE_METHOD(MpFixture, "mpi engine: reads Open MPI's mpi_yield_when_idle through MPI_T", "[mpi]") {
  if (backend() != "mpi") return;
  make_group();  // the engine's runtime exists once a group does
  // mpirun exports OMPI_MCA_mpi_oversubscribe=1 when it places more ranks than slots, and Open MPI then
  // turns mpi_yield_when_idle on unless the user set it; a user's setting wins. The engine must see the
  // same value the library uses, or its waiters yield twice per look (oversubscribed) or never.
  const auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  const std::string user = env("OMPI_MCA_mpi_yield_when_idle");
  const bool expected = user.empty() ? env("OMPI_MCA_mpi_oversubscribe") == "1"
                                     : (user == "1" || user == "true" || user == "yes" || user == "enabled");
  INFO("OMPI_MCA_mpi_oversubscribe=" << env("OMPI_MCA_mpi_oversubscribe")
                                     << " OMPI_MCA_mpi_yield_when_idle=" << user);
  CHECK(collectives::mpi::MpiRuntime::progress_yields_when_idle() == expected);
}

TEST_CASE_METHOD(MpFixture, "mpi engine: an alltoall block for itself larger than expected fails before sending",
                 "[mpi][alltoall]") {
  if (backend() != "mpi") return;
  auto pg = make_group();  // the failure breaks the group
  const int ws = size();
  // Every rank sends one element to each rank and two to itself, but expects one from itself.
  std::vector<int64_t> in_splits(static_cast<size_t>(ws), 1), out_splits(static_cast<size_t>(ws), 1);
  in_splits[static_cast<size_t>(rank())] = 2;
  Tensor in = zeros({ws + 1}, DType::Int64);
  Tensor out = zeros({ws}, DType::Int64);
  auto work = pg->alltoall_single(out, in, out_splits, in_splits);
  CHECK_THROWS_WITH(work->wait(), Contains("alltoall_single") && Contains("message truncated") &&
                                      Contains("sends itself 2 elements but expects 1"));
}
