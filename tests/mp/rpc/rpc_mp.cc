#include "tests/mp/rpc/rpc_mp.h"

#include <chrono>
#include <mutex>
#include <thread>

#include "base/env.h"
#include "base/logging.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"

namespace braid::mp {

namespace {

std::atomic<int> g_live{0};

struct Accumulator {
  explicit Accumulator(Tensor start) : total(std::move(start)) { ++g_live; }
  ~Accumulator() { --g_live; }
  Accumulator(const Accumulator&) = delete;
  Accumulator& operator=(const Accumulator&) = delete;
  std::mutex mu;
  Tensor total;
};

using rpc::Args;
using rpc::Value;

}  // namespace

int live_accumulators() { return g_live.load(); }

std::string rpc_transport_under_test() { return env::get("BRAID_RPC_TRANSPORT").value_or("tcp"); }

void register_rpc_test_functions() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = rpc::global_registry();
    r.add_function("mp.add", [](const Args& a) -> Value { return braid::add(a.at(0).as_tensor(), a.at(1).as_tensor()); });
    r.add_function("mp.echo", [](const Args& a) -> Value { return a.at(0); });
    r.add_function("mp.whoami", [](const Args&) -> Value { return Value(rpc::get_worker_info().name); });
    r.add_function("mp.fail", [](const Args& a) -> Value { throw std::runtime_error("mp failure: " + a.at(0).as_string()); });
    r.add_function("mp.sleep_ms", [](const Args& a) -> Value {
      std::this_thread::sleep_for(std::chrono::milliseconds(a.at(0).as_int()));
      return a.at(0);
    });
    // Forwards a call one hop further: (next worker, fn, args...).
    r.add_function("mp.forward", [](const Args& a) -> Value {
      rpc::ValueList rest(a.positional.begin() + 2, a.positional.end());
      return rpc::rpc_sync(a.at(0).as_string(), a.at(1).as_string(), Args(rest));
    });
    // Calls "add" on the Accumulator behind the RRef argument (a fork), returning the new total.
    r.add_function("mp.add_through", [](const Args& a) -> Value {
      return a.at(0).as_rref().rpc_sync().call("add", {a.at(1)});
    });
    // Passes the RRef on to the next worker (a fork of a fork): (rref, next worker, value).
    r.add_function("mp.pass_on", [](const Args& a) -> Value {
      return rpc::rpc_sync(a.at(1).as_string(), "mp.add_through", {a.at(0), a.at(2)});
    });
    r.add_function("mp.live_accumulators", [](const Args&) -> Value { return Value(int64_t{live_accumulators()}); });
    r.add_class<Accumulator>("mp.Accumulator")
        .constructor([](const Args& a) { return std::make_shared<Accumulator>(a.at(0).as_tensor().clone()); })
        .method("add",
                [](Accumulator& acc, const Args& a) -> Value {
                  std::lock_guard<std::mutex> lock(acc.mu);
                  acc.total = braid::add(acc.total, a.at(0).as_tensor());
                  return acc.total;
                })
        .to_value([](const Accumulator& acc) -> Value { return acc.total; });
  });
}

RpcJob::RpcJob(const MpFixture& fixture, rpc::Millis rpc_timeout, int threads) {
  register_rpc_test_functions();
  rpc::RpcBackendOptions o;
  o.store = fixture.store();
  o.transport = rpc_transport_under_test();
  o.rpc_timeout = rpc_timeout;
  o.num_worker_threads = threads;
  o.join_timeout = rpc::Millis(60'000);
  rpc::init_rpc(worker_name(fixture.rank()), fixture.rank(), fixture.size(), o);
}

RpcJob::~RpcJob() {
  try {
    shutdown(true);
  } catch (const std::exception& e) {
    logging::get("braid.test")->error("rpc test: shutdown failed: {}", e.what());
  }
}

void RpcJob::shutdown(bool graceful) {
  if (down_) return;
  down_ = true;
  rpc::shutdown(graceful);
}

}  // namespace braid::mp
