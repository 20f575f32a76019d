// The RPC quick start of README.md, as a program: worker0 (the master) builds a Counter object on every
// other worker with remote(), adds to each through its RRef, passes one RRef on to another worker (a
// fork) that adds through it too, fetches the totals with to_here(), and checks them. Every worker then
// shuts down gracefully. Run it under mpirun (the store comes from MPI) or with env:// variables; the
// transport is the first argument (tcp by default, or ucx).
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "collectives/mpi/mpi_bootstrap.h"
#include "rpc/api.h"
#include "store/rendezvous.h"

namespace {

struct Counter {
  int64_t total = 0;
};

}  // namespace

int run(int argc, char** argv) {
  using namespace braid;
  using namespace braid::rpc;

  // What others may call here: registered by name on every worker, before init_rpc.
  global_registry()
      .add_class<Counter>("Counter")
      .constructor([](const Args&) { return std::make_shared<Counter>(); })
      .method("add", [](Counter& c, const Args& a) -> Value { return Value(c.total += a.at(0).as_int()); })
      .to_value([](const Counter& c) -> Value { return Value(c.total); });
  global_registry().add_function("add_through", [](const Args& a) -> Value {
    return a.at(0).as_rref().rpc_sync().call("add", {a.at(1)});  // a.at(0) arrived as a fork of the RRef
  });

  RpcBackendOptions opts;
  opts.transport = argc > 1 ? argv[1] : "tcp";
  const store::LaunchInfo launch = store::detect_launch();
  int rank = -1, size = -1;
  if (launch.launcher == "mpi") {  // mpirun gives no MASTER_ADDR: the rendezvous store comes from MPI
    opts.store = collectives::mpi::mpi_bootstrap_store(std::chrono::milliseconds(60'000));
    rank = launch.rank;
    size = launch.world_size;
  }
  init_rpc("worker" + std::to_string(launch.rank), rank, size, opts);
  size = static_cast<int>(get_worker_infos().size());

  bool ok = true;
  if (get_worker_info().id == 0) {
    std::vector<RRef> counters;
    for (int w = 1; w < size; ++w) counters.push_back(remote("worker" + std::to_string(w), "Counter"));
    for (size_t i = 0; i < counters.size(); ++i) counters[i].rpc_sync().call("add", {Value(int64_t(i + 1))});
    // worker1's counter, passed to the last worker, which adds 100 through it.
    if (!counters.empty()) rpc_sync("worker" + std::to_string(size - 1), "add_through", {Value(counters[0]), Value(100)});
    for (size_t i = 0; i < counters.size(); ++i) {
      const int64_t want = static_cast<int64_t>(i + 1) + (i == 0 ? 100 : 0);
      const int64_t got = counters[i].to_here().as_int();
      std::printf("rpc_demo: Counter on %s holds %lld (expected %lld)\n", counters[i].owner_name().c_str(),
                  static_cast<long long>(got), static_cast<long long>(want));
      ok = ok && got == want;
    }
  }
  shutdown();  // graceful: waits for every worker, releases the RRefs
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rpc_demo: error: %s\n", e.what());
    return 1;
  }
}
