// The main of collectives_mp_tests: every rank runs it. It joins the job (tests/mp/support/mp_world.h)
// before Catch2 runs the test cases, in the same order on every rank, and leaves it afterwards.
//
// Exit codes: 0 when every assertion passed, 1 when one failed, 2 when the job cannot be set up (bad backend,
// mpi without mpirun, rendezvous failure), 77 when the backend cannot run on this machine (nccl without a
// CUDA device per rank; CTest's SKIP_RETURN_CODE).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <exception>

#include "tests/mp/support/mp_fixture.h"
#include "tests/mp/support/mp_world.h"

namespace {

constexpr int kSetupFailed = 2;
constexpr int kSkipped = 77;

// Listing or help needs no job (and must work without a launcher).
bool only_lists(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--list", 6) == 0 || std::strcmp(a, "-l") == 0 || std::strcmp(a, "-h") == 0 ||
        std::strcmp(a, "--help") == 0 || std::strcmp(a, "-?") == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  if (only_lists(argc, argv)) return session.run();

  try {
    braid::mp::init_world();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collectives_mp_tests: cannot set up the job: %s\n", e.what());
    return kSetupFailed;
  }
  const braid::mp::World& w = braid::mp::world();
  if (!w.skip_reason.empty()) {
    std::printf("collectives_mp_tests: SKIPPED on rank %d: %s\n", w.rank, w.skip_reason.c_str());
    braid::mp::shutdown_world();
    return kSkipped;
  }
  if (w.rank == 0) {
    std::printf("collectives_mp_tests: backend %s, %d rank(s), launched by %s\n", w.backend.c_str(), w.size,
                w.launcher.c_str());
    std::fflush(stdout);
  }
  const int failed = session.run();
  braid::mp::release_shared_group();
  braid::mp::shutdown_world();
  // Catch2 returns the number of failures, which could collide with kSkipped.
  return failed == 0 ? 0 : 1;
}
