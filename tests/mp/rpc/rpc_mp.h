// What the multi-process RPC tests share: an RPC job per test case (RpcJob: init_rpc over the case's
// private store, a graceful shutdown at the end even when a check failed) and the functions and classes
// every worker registers (rpc_functions.cc). The transport is BRAID_RPC_TRANSPORT (tcp by default, or ucx).
#pragma once

#include <atomic>
#include <string>

#include "rpc/api.h"
#include "tests/mp/support/mp_fixture.h"

namespace braid::mp {

// Registers the suite's functions in rpc::global_registry() (once per process).
void register_rpc_test_functions();
// How many Accumulator objects live in this process.
int live_accumulators();

std::string rpc_transport_under_test();
inline std::string worker_name(int rank) { return "worker" + std::to_string(rank); }

class RpcJob {
 public:
  // Joins every rank of the job as worker<rank> over the transport under test.
  RpcJob(const MpFixture& fixture, rpc::Millis rpc_timeout = rpc::Millis(60'000), int threads = 8);
  ~RpcJob();  // graceful shutdown unless shutdown() ran
  RpcJob(const RpcJob&) = delete;
  RpcJob& operator=(const RpcJob&) = delete;

  rpc::RpcAgent& agent() { return rpc::current_agent(); }
  void shutdown(bool graceful = true);

 private:
  bool down_ = false;
};

}  // namespace braid::mp
