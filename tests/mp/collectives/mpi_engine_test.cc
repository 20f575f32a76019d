// What the mpi engine learns from Open MPI itself. Other engines have nothing to check here.
#include <cstdlib>
#include <string>

#include "collectives/mpi/mpi_runtime.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;

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
