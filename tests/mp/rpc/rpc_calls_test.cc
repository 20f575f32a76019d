// RPC across processes: sync/async/remote, nested calls, many threads, 64 MiB tensors, timeouts and a
// graceful shutdown with calls in flight. Every rank runs every case; calls go to the next rank.
#include <catch2/catch.hpp>

#include <thread>

#include "rpc/api.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/mp/rpc/rpc_mp.h"

namespace braid::mp {

using rpc::Args;
using rpc::Value;

namespace {
std::string next_worker(const MpFixture& f, int hop = 1) { return worker_name((f.rank() + hop) % f.size()); }
}  // namespace

TEST_CASE_METHOD(MpFixture, "rpc: sync, async and remote calls reach the named worker", "[rpc]") {
  RpcJob job(*this);
  const std::string to = next_worker(*this);
  CHECK(rpc::rpc_sync(to, "mp.whoami").as_string() == to);
  const Tensor a = full({4}, float(rank()));
  const Tensor b = full({4}, 1.0f);
  CHECK(equal(rpc::rpc_sync(to, "mp.add", {Value(a), Value(b)}).as_tensor(), full({4}, float(rank() + 1))));
  auto f = rpc::rpc_async(to, "mp.add", {Value(a), Value(a)});
  CHECK(equal(f.value().as_tensor(), full({4}, float(2 * rank()))));
  rpc::RRef r = rpc::remote(to, "mp.add", {Value(a), Value(b)});
  CHECK(r.owner_name() == to);
  CHECK(equal(r.to_here().as_tensor(), full({4}, float(rank() + 1))));
  CHECK_THROWS_WITH(rpc::rpc_sync(to, "mp.fail", {Value("x")}), Catch::Contains("mp failure: x") &&
                                                                     Catch::Contains(to));
  CHECK_THROWS_WITH(rpc::rpc_sync(to, "mp.missing"), Catch::Contains("no function or class named 'mp.missing'"));
  CHECK_THROWS_WITH(rpc::rpc_sync("nobody", "mp.echo", {Value(1)}), Catch::Contains("unknown destination worker"));
}

TEST_CASE_METHOD(MpFixture, "rpc: nested calls hop across workers and errors name where they happened", "[rpc]") {
  RpcJob job(*this);
  // rank r -> r+1 -> r+2 (with two ranks the second hop comes back to the caller).
  const Value out = rpc::rpc_sync(next_worker(*this), "mp.forward", {Value(next_worker(*this, 2)), Value("mp.whoami")});
  CHECK(out.as_string() == next_worker(*this, 2));
  CHECK_THROWS_WITH(rpc::rpc_sync(next_worker(*this), "mp.forward",
                                  {Value(next_worker(*this, 2)), Value("mp.fail"), Value("deep")}),
                    Catch::Contains("mp failure: deep") && Catch::Contains(next_worker(*this, 2)));
}

TEST_CASE_METHOD(MpFixture, "rpc: many threads call at once, each gets its own answer", "[rpc]") {
  RpcJob job(*this);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        const int64_t x = rank() * 100000 + t * 1000 + i;
        if (rpc::rpc_sync(next_worker(*this, 1 + (i % 2)), "mp.echo", {Value(x)}).as_int() != x) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong.load() == 0);
}

TEST_CASE_METHOD(MpFixture, "rpc: a 64 MiB tensor goes there and back intact", "[rpc]") {
  RpcJob job(*this);
  if (rank() == 0) {
    const Tensor big = arange(0, 16 << 20, 1, DType::Int32);  // 64 MiB
    const Value back = rpc::rpc_sync(next_worker(*this), "mp.echo", {Value(big)});
    CHECK(back.as_tensor().nbytes() == size_t{64} << 20);
    CHECK(equal(back.as_tensor(), big));
  }
}

TEST_CASE_METHOD(MpFixture, "rpc: a call past its timeout fails with TimeoutError and the job goes on", "[rpc]") {
  RpcJob job(*this);
  try {
    rpc::rpc_sync(next_worker(*this), "mp.sleep_ms", {Value(int64_t{500})}, rpc::Millis(100));
    FAIL("no timeout");
  } catch (const TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains("timed out after 100 ms") && Catch::Contains(next_worker(*this)));
  }
  CHECK(rpc::rpc_sync(next_worker(*this), "mp.echo", {Value(int64_t{3})}).as_int() == 3);
}

TEST_CASE_METHOD(MpFixture, "rpc: graceful shutdown waits for calls in flight on every worker", "[rpc]") {
  RpcJob job(*this);
  std::vector<Future<Value>> inflight;
  for (int i = 0; i < 4; ++i) {
    inflight.push_back(rpc::rpc_async(next_worker(*this), "mp.sleep_ms", {Value(int64_t{50 + 25 * i})}));
  }
  job.shutdown(true);
  for (int i = 0; i < 4; ++i) CHECK(inflight[static_cast<size_t>(i)].value(rpc::Millis(1)).as_int() == 50 + 25 * i);
  CHECK_THROWS_WITH(rpc::rpc_sync(next_worker(*this), "mp.echo", {Value(1)}),
                    Catch::Contains("RPC has not been initialized"));
}

}  // namespace braid::mp
