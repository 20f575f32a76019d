// rpc_test_peer: a separate process that joins an RPC job as worker1 of 2 and serves until it is killed
// (the killed-peer tests of tests/unit/rpc/killed_peer_test.cc), or for at most 60 s.
//
//   rpc_test_peer <store port on 127.0.0.1> <transport>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "rpc/agent.h"
#include "rpc/registry.h"
#include "store/tcp_store.h"

int main(int argc, char** argv) {
  using namespace braid;
  if (argc != 3) {
    std::fprintf(stderr, "usage: rpc_test_peer <store port> <transport>\n");
    return 2;
  }
  try {
    store::TcpStoreOptions so;
    so.timeout = std::chrono::milliseconds(20'000);
    auto st = std::make_shared<store::TCPStore>("127.0.0.1", static_cast<uint16_t>(std::atoi(argv[1])), so);
    rpc::Registry registry;
    registry.add_function("peer.echo", [](const rpc::Args& a) -> rpc::Value { return a.at(0); });
    registry.add_function("peer.sleep_ms", [](const rpc::Args& a) -> rpc::Value {
      std::this_thread::sleep_for(std::chrono::milliseconds(a.at(0).as_int()));
      return a.at(0);
    });
    rpc::RpcAgentOptions o;
    o.transport = argv[2];
    o.join_timeout = std::chrono::milliseconds(20'000);
    rpc::RpcAgent agent("worker1", 1, 2, st, o, registry);
    std::printf("rpc_test_peer: serving\n");
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    agent.shutdown(false);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rpc_test_peer: %s\n", e.what());
    return 1;
  }
  return 0;
}
