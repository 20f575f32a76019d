// dist_autograd_test_peer: joins an RPC job as worker1 of 2 (the process-wide agent, as distributed
// autograd needs) and serves "peer.dying", whose result's backward ends this process on the spot, as a
// worker that dies in the middle of a distributed backward pass. Serves for at most 60 s.
//
//   dist_autograd_test_peer <store port on 127.0.0.1> <transport> <RPC store prefix>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "autograd/ops/op_helpers.h"
#include "dist_autograd/context.h"
#include "rpc/api.h"
#include "store/tcp_store.h"

int main(int argc, char** argv) {
  using namespace braid;
  if (argc != 4) {
    std::fprintf(stderr, "usage: dist_autograd_test_peer <store port> <transport> <store prefix>\n");
    return 2;
  }
  try {
    rpc::global_registry().add_function("peer.dying", [](const rpc::Args& a) -> rpc::Value {
      const Tensor& x = a.at(0).as_tensor();
      return autograd::detail::record("DyingBackward", {x}, x.clone(), {},
                                      [](const autograd::TensorList&, autograd::SavedTensors&)
                                          -> autograd::TensorList { std::_Exit(3); });
    });
    store::TcpStoreOptions so;
    so.timeout = std::chrono::milliseconds(20'000);
    rpc::RpcBackendOptions o;
    o.store = std::make_shared<store::TCPStore>("127.0.0.1", static_cast<uint16_t>(std::atoi(argv[1])), so);
    o.transport = argv[2];
    o.store_prefix = argv[3];
    o.join_timeout = std::chrono::milliseconds(20'000);
    rpc::init_rpc("worker1", 1, 2, o);
    std::printf("dist_autograd_test_peer: serving (%zu contexts)\n", dist_autograd::num_contexts());
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    rpc::shutdown(false);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_autograd_test_peer: %s\n", e.what());
    return 1;
  }
  return 0;
}
