// A job of RPC agents in one process for tests: N agents named worker0..N-1 over a given transport kind
// ("loopback" by default, or "tcp" / "ucx"), sharing one HashStore, built concurrently (construction waits
// for every worker) and shut down gracefully, concurrently, at the end.
#pragma once

#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "rpc/agent.h"
#include "store/hash_store.h"
#include "tests/unit/rpc/support/loopback_transport.h"

namespace braid::rpc::testing {

class AgentJob {
 public:
  AgentJob(int n, Registry& registry, RpcAgentOptions options = {}, const std::string& transport = "loopback")
      : store_(std::make_shared<store::HashStore>()) {
    auto hub = std::make_shared<LoopbackHub>();
    options.join_timeout = Millis(20'000);
    std::vector<std::future<std::unique_ptr<RpcAgent>>> made;
    for (int i = 0; i < n; ++i) {
      made.push_back(std::async(std::launch::async, [this, i, n, hub, options, transport, &registry] {
        std::unique_ptr<Transport> t;
        if (transport == "loopback") t = std::make_unique<LoopbackTransport>(hub, i);
        RpcAgentOptions o = options;
        o.transport = transport == "loopback" ? "tcp" : transport;
        return std::make_unique<RpcAgent>("worker" + std::to_string(i), i, n, store_, o, registry, std::move(t));
      }));
    }
    for (auto& f : made) agents_.push_back(f.get());
  }
  ~AgentJob() {
    try {
      shutdown_all(true);
    } catch (...) {
    }
  }
  AgentJob(const AgentJob&) = delete;
  AgentJob& operator=(const AgentJob&) = delete;

  RpcAgent& operator[](int i) { return *agents_[static_cast<size_t>(i)]; }
  int size() const { return static_cast<int>(agents_.size()); }

  // Shuts every agent down concurrently (graceful shutdown is a barrier); rethrows the first failure.
  void shutdown_all(bool graceful) {
    std::vector<std::future<void>> done;
    for (auto& a : agents_) {
      done.push_back(std::async(std::launch::async, [&a, graceful] { a->shutdown(graceful); }));
    }
    for (auto& d : done) d.get();
  }

 private:
  std::shared_ptr<store::HashStore> store_;
  std::vector<std::unique_ptr<RpcAgent>> agents_;
};

// The transports the agent tests run over: the in-process loopback, TCP, and UCX when built with it.
// BRAID_RPC_TEST_TRANSPORTS (comma-separated) narrows the list, e.g. to debug one transport.
inline std::vector<std::string> transports_under_test() {
  std::vector<std::string> all = {"loopback", "tcp"};
  if (BRAID_HAVE_UCX) all.push_back("ucx");
  const char* only = std::getenv("BRAID_RPC_TEST_TRANSPORTS");
  if (only == nullptr || *only == 0) return all;
  std::vector<std::string> chosen;
  for (const auto& t : all) {
    if (("," + std::string(only) + ",").find("," + t + ",") != std::string::npos) chosen.push_back(t);
  }
  return chosen;
}

// Waits (up to `limit`) until `cond` holds; returns whether it did.
inline bool eventually(const std::function<bool()>& cond, Millis limit = Millis(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(Millis(2));
  }
  return cond();
}

}  // namespace braid::rpc::testing
