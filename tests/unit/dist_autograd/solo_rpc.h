// A one-worker RPC job for unit tests: init_rpc("worker0", rank 0, world size 1) on a private HashStore,
// shut down gracefully at the end of the scope. Remote calls to "worker0" are this process's own.
#pragma once

#include <memory>

#include "rpc/api.h"
#include "store/hash_store.h"

namespace braid::dist_autograd::testing {

class SoloRpc {
 public:
  SoloRpc() {
    rpc::RpcBackendOptions o;
    o.store = std::make_shared<store::HashStore>();
    o.rpc_timeout = rpc::Millis(10'000);
    o.join_timeout = rpc::Millis(10'000);
    o.num_worker_threads = 2;
    rpc::init_rpc("worker0", 0, 1, o);
  }
  ~SoloRpc() {
    try {
      rpc::shutdown(true);
    } catch (...) {
      // A failed shutdown must not end the test run; the next init_rpc would report it.
    }
  }
  SoloRpc(const SoloRpc&) = delete;
  SoloRpc& operator=(const SoloRpc&) = delete;
};

}  // namespace braid::dist_autograd::testing
