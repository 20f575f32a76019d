// A worker that dies in the middle of a distributed backward pass: the caller's backward fails promptly
// (well within the RPC timeout), naming the worker, and leaving the context still works. The worker is a
// separate process (dist_autograd_test_peer) so that its death is real.
#include <catch2/catch.hpp>

#include <chrono>

#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "base/config.h"
#include "dist_autograd/context.h"
#include "rpc/api.h"
#include "store/tcp_store.h"
#include "tensor/factory.h"
#include "tests/support/child_process.h"

namespace braid::dist_autograd {
namespace {

std::vector<std::string> transports() {
#if BRAID_HAVE_UCX
  return {"tcp", "ucx"};
#else
  return {"tcp"};
#endif
}

TEST_CASE("dist_autograd: a worker that dies mid-backward fails the caller promptly, naming it",
          "[dist_autograd][killed]") {
  const std::string transport = GENERATE(from_range(transports()));
  INFO("transport " << transport);
  store::TcpStoreOptions so;
  so.is_master = true;
  so.wait_for_workers = false;
  so.timeout = rpc::Millis(20'000);
  auto st = std::make_shared<store::TCPStore>("127.0.0.1", 0, so);
  const std::string prefix = "rpc/dead-worker-" + transport;
  testing::ChildProcess peer(BRAID_DIST_AUTOGRAD_TEST_PEER, {std::to_string(st->port()), transport, prefix});
  rpc::RpcBackendOptions o;
  o.store = st;
  o.store_prefix = prefix;
  o.transport = transport;
  o.rpc_timeout = rpc::Millis(30'000);
  o.join_timeout = rpc::Millis(20'000);
  rpc::init_rpc("worker0", 0, 2, o);
  {
    Tensor x = from_vector<float>({1, 2}, {2});
    autograd::set_requires_grad(x);
    Context ctx;
    const Tensor y = rpc::rpc_sync("worker1", "peer.dying", {rpc::Value(x)}).as_tensor();
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(backward(ctx.id(), {autograd::sum(y)}), Catch::Contains("worker1"));
    const auto took = std::chrono::duration_cast<rpc::Millis>(std::chrono::steady_clock::now() - t0);
    INFO("backward failed after " << took.count() << " ms (rpc timeout 30000 ms)");
    CHECK(took < rpc::Millis(10'000));
  }  // the release towards the dead worker fails and is logged; the guard still returns
  CHECK(num_contexts() == 0);
  rpc::shutdown(false);
}

}  // namespace
}  // namespace braid::dist_autograd
