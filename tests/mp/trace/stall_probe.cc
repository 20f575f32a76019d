// A plain library program, as a user writes one under mpirun: no `braid run`, the group's default
// 30-minute op timeout. Rank 1 holds back from the N-th allreduce until ranks 0 and 2 have dumped their
// flight recorders (what their stall watchdogs do after BRAID_STALL_WARN_S), then joins it, so the job
// ends cleanly and the dumps hold the stall. stall_watchdog_test.py runs it and checks the warnings and
// `braid trace analyze`. With `stop`, rank 1 hangs for real instead: it writes its pid to
// BRAID_TRACE_DIR/stopped-pid and stops itself (SIGSTOP, every thread); the test continues it (SIGCONT)
// once the other ranks' dumps are there.
//
// Usage: stall_probe BACKEND [hold|stop]. Needs BRAID_TRACE_DIR. Exit 0 when every allreduce summed right
// and the dumps appeared; 1 otherwise (rank 1 also says so when it gave up waiting and joined anyway).
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "collectives/registry/group_registry.h"
#include "tensor/factory.h"

namespace {

constexpr int kWarmOps = 3;
// How long rank 1 waits for the others' dumps before it joins anyway (and fails): a bound for a broken
// watchdog, far above the 2 s stall_warn_s the test sets and below the 70 s the issue allows.
constexpr auto kDumpWaitMax = std::chrono::seconds(65);

bool dumps_present(const std::filesystem::path& dir, int size) {
  for (int r = 0; r < size; ++r) {
    if (r == 1) continue;
    if (!std::filesystem::exists(dir / ("rank-" + std::to_string(r) + ".json"))) return false;
  }
  return true;
}

int run(const std::string& backend, bool stop) {
  using namespace braid;
  using namespace braid::collectives;
  const char* dir_env = std::getenv("BRAID_TRACE_DIR");
  if (dir_env == nullptr) {
    std::fprintf(stderr, "stall_probe: BRAID_TRACE_DIR must be set\n");
    return 1;
  }
  init_process_group(backend);
  const int rank = get_rank();
  const int size = get_world_size();
  bool ok = true;
  for (int i = 0; i <= kWarmOps; ++i) {
    if (i == kWarmOps && rank == 1 && stop) {
      std::ofstream(std::filesystem::path(dir_env) / "stopped-pid") << ::getpid() << "\n";
      std::printf("stall_probe: rank 1 (pid %d) stops itself before allreduce #%llu\n", static_cast<int>(::getpid()),
                  static_cast<unsigned long long>(get_sequence_number_for_group() + 1));
      std::fflush(stdout);
      std::raise(SIGSTOP);
      ok = dumps_present(dir_env, size);
      std::printf("stall_probe: rank 1 continued; the other ranks' dumps are %s\n", ok ? "there" : "MISSING");
      std::fflush(stdout);
    } else if (i == kWarmOps && rank == 1) {
      const auto until = std::chrono::steady_clock::now() + kDumpWaitMax;
      while (!dumps_present(dir_env, size) && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (!dumps_present(dir_env, size)) {
        std::fprintf(stderr, "stall_probe: rank 1: no flight-recorder dumps from the other ranks within %lld s\n",
                     static_cast<long long>(kDumpWaitMax.count()));
        ok = false;
      }
      std::printf("stall_probe: rank 1 joins allreduce #%llu now\n",
                  static_cast<unsigned long long>(get_sequence_number_for_group() + 1));
      std::fflush(stdout);
    }
    Tensor t = full({8}, static_cast<double>(rank + 1));
    TensorList ts{t};
    default_group()->allreduce(ts)->wait();
    ok = ok && to_vector<float>(t)[0] == static_cast<float>(size * (size + 1) / 2);
  }
  // Rank 0 hosts the store: every rank meets before anyone leaves (collectives_demo.cc says why).
  barrier();
  destroy_process_group();
  std::printf("stall_probe: rank %d %s\n", rank, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 2 ? argv[2] : "hold";
    if (mode != "hold" && mode != "stop") {
      std::fprintf(stderr, "stall_probe: mode must be hold or stop, got '%s'\n", mode.c_str());
      return 2;
    }
    return run(argc > 1 ? argv[1] : "gloo", mode == "stop");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stall_probe: %s\n", e.what());
    return 1;
  }
}
