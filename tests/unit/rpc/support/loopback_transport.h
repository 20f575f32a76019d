// An in-process Transport for agent tests: several agents in one process exchange messages through a
// shared hub, each destination served by its own delivery thread (so delivery is asynchronous and ordered
// per sender, as on a real transport). Messages are handed over as they are (tensors are not copied);
// a send to a transport that has shut down reports on_peer_failure to the sender.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rpc/transport.h"

namespace braid::rpc::testing {

class LoopbackHub;

class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(std::shared_ptr<LoopbackHub> hub, int id) : hub_(std::move(hub)), id_(id) {}
  ~LoopbackTransport() override { shutdown(); }

  std::string name() const override { return "loopback"; }
  std::vector<uint8_t> local_address() const override {
    const std::string a = "loopback:" + std::to_string(id_);
    return {a.begin(), a.end()};
  }
  std::string describe_address(const std::vector<uint8_t>& address) const override {
    return {address.begin(), address.end()};
  }
  void start(int self_id, TransportHandlers handlers) override;
  void add_peers(const std::vector<PeerInfo>&) override {}
  void send(int peer, Message msg) override;
  void shutdown() override;

 private:
  friend class LoopbackHub;
  void run();
  bool enqueue(int from, Message msg);
  void notify_failure(int peer);

  std::shared_ptr<LoopbackHub> hub_;
  const int id_;
  TransportHandlers handlers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int, Message>> inbox_;
  bool started_ = false;
  bool stopped_ = false;
  std::thread thread_;
};

class LoopbackHub {
 public:
  void attach(int id, LoopbackTransport* t) {
    std::lock_guard<std::mutex> lock(mu_);
    members_[id] = t;
  }
  // Removes `id` and tells every other member that it is gone (as a closed TCP connection would).
  void detach(int id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (members_.erase(id) == 0) return;
    for (auto& [other, t] : members_) t->notify_failure(id);
  }
  // False when `to` is gone.
  bool route(int from, int to, Message msg) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = members_.find(to);
    return it != members_.end() && it->second->enqueue(from, std::move(msg));
  }

 private:
  std::mutex mu_;
  std::map<int, LoopbackTransport*> members_;
};

inline void LoopbackTransport::start(int, TransportHandlers handlers) {
  handlers_ = std::move(handlers);
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_ = true;
  }
  thread_ = std::thread([this] { run(); });
  hub_->attach(id_, this);
}

inline void LoopbackTransport::send(int peer, Message msg) {
  if (!hub_->route(id_, peer, std::move(msg))) notify_failure(peer);
}

// Reported from our own delivery thread, as a real transport reports from its I/O thread.
inline void LoopbackTransport::notify_failure(int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return;
  Message failure;
  failure.meta.assign({static_cast<uint8_t>(peer)});
  inbox_.emplace_back(-1, std::move(failure));
  cv_.notify_one();
}

inline bool LoopbackTransport::enqueue(int from, Message msg) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_ || !started_) return false;
  inbox_.emplace_back(from, std::move(msg));
  cv_.notify_one();
  return true;
}

inline void LoopbackTransport::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopped_ || !inbox_.empty(); });
    if (stopped_) return;
    auto [from, msg] = std::move(inbox_.front());
    inbox_.pop_front();
    lock.unlock();
    if (from < 0) {
      handlers_.on_peer_failure(msg.meta[0], "loopback peer " + std::to_string(msg.meta[0]) + " is gone");
    } else {
      handlers_.on_message(from, std::move(msg));
    }
    lock.lock();
  }
}

inline void LoopbackTransport::shutdown() {
  hub_->detach(id_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    inbox_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace braid::rpc::testing
