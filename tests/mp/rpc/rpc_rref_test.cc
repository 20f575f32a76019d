// RRefs across processes: an object created by one worker on another, forked along a chain of workers
// that call through it, and freed on its owner once the last user is gone; zero leaked RRefs at shutdown.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "rpc/api.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/mp/rpc/rpc_mp.h"

namespace braid::mp {

using rpc::Value;

TEST_CASE_METHOD(MpFixture, "rpc: an RRef forked along a chain of workers keeps its owner's object alive", "[rpc][rref]") {
  if (size() < 3) {
    SUCCEED("the fork chain needs 3 workers; this run has " << size());
    return;
  }
  RpcJob job(*this);
  const std::string owner = worker_name(2);
  if (rank() == 0) {
    {
      rpc::RRef acc = rpc::remote(owner, "mp.Accumulator", {Value(zeros({3}))});
      // worker0 -> worker1 (fork) -> owner (fork of a fork back to the owner) via pass_on.
      const Value t1 = rpc::rpc_sync(worker_name(1), "mp.add_through", {Value(acc), Value(ones({3}))});
      CHECK(equal(t1.as_tensor(), ones({3})));
      const Value t2 =
          rpc::rpc_sync(worker_name(1), "mp.pass_on", {Value(acc), Value(owner), Value(full({3}, 2.0f))});
      CHECK(equal(t2.as_tensor(), full({3}, 3.0f)));
      CHECK(equal(acc.to_here().as_tensor(), full({3}, 3.0f)));
      CHECK(rpc::rpc_sync(owner, "mp.live_accumulators").as_int() == 1);
    }
    // Every user is gone: the owner frees the object (deletes are asynchronous: poll, bounded).
    bool freed = false;
    for (int i = 0; i < 500 && !freed; ++i) {
      freed = rpc::rpc_sync(owner, "mp.live_accumulators").as_int() == 0;
      if (!freed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(freed);
  }
  job.shutdown(true);
  CHECK(live_accumulators() == 0);
}

TEST_CASE_METHOD(MpFixture, "rpc: RRefs still held at shutdown are released and none leak", "[rpc][rref]") {
  RpcJob job(*this);
  const std::string to = worker_name((rank() + 1) % size());
  rpc::RRef held = rpc::remote(to, "mp.Accumulator", {Value(ones({2}))});
  CHECK(equal(held.rpc_sync().call("add", {Value(ones({2}))}).as_tensor(), full({2}, 2.0f)));
  rpc::RRef local = rpc::RRef::local(Value(int64_t{rank()}));
  CHECK(local.is_owner());
  CHECK(rpc::rpc_sync(to, "mp.echo", {Value(local)}).as_rref().local_value().as_int() == rank());
  auto agent = rpc::current_agent_shared();  // kept: shutdown drops the process-wide handle
  job.shutdown(true);
  CHECK(agent->leaked_rrefs() == 0);
  CHECK(live_accumulators() == 0);
}

}  // namespace braid::mp
