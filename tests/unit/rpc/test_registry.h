// The functions and classes the RPC agent tests call remotely, registered once in one Registry.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "rpc/agent.h"
#include "rpc/registry.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"

namespace braid::rpc::testing {

// How many Counter objects exist in this process (the RRef tests watch owners free them).
inline std::atomic<int> g_live_counters{0};

struct Counter {
  explicit Counter(int64_t start) : value(start) { ++g_live_counters; }
  ~Counter() { --g_live_counters; }
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;
  std::atomic<int64_t> value;
};

// The agent of the worker running the current call (set by the tests that need nested calls).
inline std::atomic<RpcAgent*> g_agents[8];

inline std::mutex g_release_mu;
inline Future<Value> g_release("released");  // GUARDED_BY(g_release_mu)

inline Registry& test_registry() {
  static Registry* reg = [] {
    auto* r = new Registry();
    r->add_function("add", [](const Args& a) -> Value { return braid::add(a.at(0).as_tensor(), a.at(1).as_tensor()); });
    r->add_function("echo", [](const Args& a) -> Value { return a.size() == 1 ? a.at(0) : Value(tuple(a.positional)); });
    r->add_function("concat", [](const Args& a) -> Value {
      return a.at(0).as_string() + a.kwarg("sep", Value("+")).as_string() + a.at(1).as_string();
    });
    r->add_function("fail", [](const Args& a) -> Value {
      throw std::runtime_error("boom: " + a.at(0).as_string());
    });
    r->add_function("sleep_ms", [](const Args& a) -> Value {
      std::this_thread::sleep_for(std::chrono::milliseconds(a.at(0).as_int()));
      return a.at(0);
    });
    // Calls `fn` on worker a.at(0) from the callee's agent (nested calls A -> B -> C).
    r->add_function("forward_call", [](const Args& a) -> Value {
      const int here = static_cast<int>(a.at(1).as_int());
      RpcAgent* agent = g_agents[here].load();
      ValueList rest(a.positional.begin() + 3, a.positional.end());
      return agent->call_sync(agent->worker(a.at(0).as_string()), a.at(2).as_string(), Args(rest));
    });
    // Runs the method "add" through the RRef argument (which arrives forked) and returns the new value.
    r->add_function("bump_through", [](const Args& a) -> Value {
      return a.at(0).as_rref().rpc_sync().call("add", {a.at(1)});
    });
    // Returns the RRef it was given (a fork travels back).
    r->add_function("identity_rref", [](const Args& a) -> Value { return a.at(0); });
    // An async function: its future completes when "release" runs (on a worker thread that must be free,
    // so with one worker thread this proves the first call released it).
    r->add_async_function("wait_for_release", [](const Args&) -> Future<Value> {
      std::lock_guard<std::mutex> lock(g_release_mu);
      g_release = Future<Value>("released");
      return g_release;
    });
    r->add_function("release", [](const Args& a) -> Value {
      std::lock_guard<std::mutex> lock(g_release_mu);
      g_release.set_value(a.at(0));
      return Value(true);
    });
    r->add_class<Counter>("Counter")
        .constructor([](const Args& a) { return std::make_shared<Counter>(a.size() > 0 ? a.at(0).as_int() : 0); })
        .method("add", [](Counter& c, const Args& a) -> Value { return Value(c.value += a.at(0).as_int()); })
        .method("get", [](Counter& c, const Args&) -> Value { return Value(c.value.load()); })
        .to_value([](const Counter& c) -> Value {
          Dict d;
          d.set("value", Value(c.value.load()));
          return Value(d);
        });
    return r;
  }();
  return *reg;
}

}  // namespace braid::rpc::testing
