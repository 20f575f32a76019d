// Helpers of the TCP transport tests: a transport with the messages and failures it saw, and a raw socket
// that speaks (or mangles) the wire format.
#pragma once

#include <catch2/catch.hpp>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rpc/tcp/tcp_transport.h"
#include "rpc/tcp/tcp_transport_impl.h"
#include "tensor/factory.h"

namespace braid::rpc::test {

using namespace std::chrono_literals;

struct Received {
  int from = -1;
  Message msg;
};

// Polls `pred` until it holds or `timeout` passes.
inline bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 5000ms) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// One started transport. By default it records every message and failure; `handler` replaces the
// recording of messages (e.g. an echo).
class Node {
 public:
  using Handler = std::function<void(Node& self, int from, Message msg)>;

  explicit Node(int id, TransportOptions options = {}, Handler handler = {})
      : id_(id), transport_(make_tcp_transport(options)), handler_(std::move(handler)) {
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
  tcp_detail::TcpTransport& tcp() { return dynamic_cast<tcp_detail::TcpTransport&>(*transport_); }
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

inline std::string meta_text(const Message& m) { return std::string(m.meta.begin(), m.meta.end()); }

// A plain socket to a transport, for feeding it bytes it must refuse.
class RawClient {
 public:
  explicit RawClient(const std::vector<uint8_t>& address) : socket_(io_) {
    const std::string text(address.begin(), address.end());
    const size_t colon = text.rfind(':');
    const boost::asio::ip::tcp::endpoint ep(boost::asio::ip::make_address(text.substr(0, colon)),
                                            static_cast<uint16_t>(std::stoi(text.substr(colon + 1))));
    socket_.connect(ep);
  }
  void write(const std::vector<uint8_t>& bytes) { boost::asio::write(socket_, boost::asio::buffer(bytes)); }

  // Reads exactly n bytes; an empty vector when they do not come within `timeout`.
  std::vector<uint8_t> read(size_t n, std::chrono::milliseconds timeout = 5000ms) {
    std::vector<uint8_t> buf(n);
    boost::system::error_code result = boost::asio::error::timed_out;
    bool done = false;
    boost::asio::async_read(socket_, boost::asio::buffer(buf), [&](const boost::system::error_code& ec, size_t) {
      done = true;
      result = ec;
    });
    run_for(timeout, done);
    return done && !result ? buf : std::vector<uint8_t>{};
  }

  // Whether the transport closed this socket within `timeout` (a read ends with EOF or a reset rather
  // than data or nothing).
  bool closed_within(std::chrono::milliseconds timeout = 5000ms) {
    uint8_t byte = 0;
    boost::system::error_code result;
    bool done = false;
    socket_.async_read_some(boost::asio::buffer(&byte, 1), [&](const boost::system::error_code& ec, size_t) {
      done = true;
      result = ec;
    });
    run_for(timeout, done);
    return done && (result == boost::asio::error::eof || result == boost::asio::error::connection_reset);
  }

 private:
  void run_for(std::chrono::milliseconds timeout, const bool& done) {
    io_.restart();
    io_.run_for(timeout);
    if (!done) {
      boost::system::error_code ec;
      socket_.cancel(ec);
      io_.restart();
      io_.run();
    }
  }

  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
};

}  // namespace braid::rpc::test
