// Helpers of the UCX transport tests: a transport with the messages and failures it saw. Include only
// when BRAID_HAVE_UCX.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rpc/ucx/ucx_transport.h"
#include "tensor/factory.h"

namespace braid::rpc::ucx_test {

using namespace std::chrono_literals;

struct Received {
  int from = -1;
  Message msg;
};

// One started UCX transport. By default it records every message and failure; `handler` replaces the
// recording of messages (e.g. an echo).
class Node {
 public:
  using Handler = std::function<void(Node& self, int from, Message msg)>;

  explicit Node(int id, TransportOptions options = {}, Handler handler = {})
      : Node(id, make_ucx_transport(options), std::move(handler)) {}
  Node(int id, std::unique_ptr<Transport> transport, Handler handler = {})
      : id_(id), transport_(std::move(transport)), handler_(std::move(handler)) {
    TransportHandlers h;
    h.on_message = [this](int from, Message msg) {
      if (handler_) {
        handler_(*this, from, std::move(msg));
        return;
      }
      std::lock_guard lock(mu_);
      messages_.push_back({from, std::move(msg)});
      cv_.notify_all();
    };
    h.on_peer_failure = [this](int peer, const std::string& reason) {
      std::lock_guard lock(mu_);
      failures_.emplace_back(peer, reason);
      cv_.notify_all();
    };
    transport_->start(id, std::move(h));
  }
  ~Node() { transport_->shutdown(); }
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  int id() const { return id_; }
  Transport& transport() { return *transport_; }
  PeerInfo info() const { return PeerInfo{id_, "node" + std::to_string(id_), transport_->local_address()}; }
  void send(int to, Message msg) { transport_->send(to, std::move(msg)); }

  bool wait_messages(size_t n, std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return messages_.size() >= n; });
  }
  bool wait_failures(size_t n, std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return failures_.size() >= n; });
  }
  std::vector<Received> messages() {
    std::lock_guard lock(mu_);
    return messages_;
  }
  std::vector<std::pair<int, std::string>> failures() {
    std::lock_guard lock(mu_);
    return failures_;
  }

 private:
  int id_;
  std::unique_ptr<Transport> transport_;
  Handler handler_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Received> messages_;
  std::vector<std::pair<int, std::string>> failures_;
};

// Tells every node about every other one.
inline void introduce(const std::vector<Node*>& nodes) {
  for (Node* n : nodes) {
    std::vector<PeerInfo> peers;
    for (Node* other : nodes) {
      if (other != n) peers.push_back(other->info());
    }
    n->transport().add_peers(peers);
  }
}

inline Message make_message(uint64_t id, std::vector<Tensor> tensors = {}, std::string meta = {},
                            MessageType type = MessageType::kCall) {
  Message m;
  m.type = type;
  m.id = id;
  m.meta.assign(meta.begin(), meta.end());
  m.tensors = std::move(tensors);
  return m;
}

inline std::string meta_of(const Message& m) { return std::string(m.meta.begin(), m.meta.end()); }

}  // namespace braid::rpc::ucx_test
